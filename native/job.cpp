#include "job.hpp"

#include "error.hpp"

namespace gds {

namespace {
struct Named {
  Mode mode;
  const char* name;
};
constexpr Named kModes[] = {
    {Mode::kCpu, "cpu"}, {Mode::kBounce, "bounce"}, {Mode::kCachedBounce, "cached-bounce"}, {Mode::kGds, "gds"}};
}  // namespace

Mode parse_mode(const std::string& name) {
  std::string known;
  for (const Named& m : kModes) {
    if (name == m.name) return m.mode;
    known += (known.empty() ? "" : ", ") + std::string(m.name);
  }
  throw InputError("--mode " + name + ": the native core runs " + known);
}

const char* mode_name(Mode mode) {
  for (const Named& m : kModes)
    if (m.mode == mode) return m.name;
  return "?";
}

}  // namespace gds
