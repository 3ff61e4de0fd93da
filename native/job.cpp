#include "job.hpp"

#include <fcntl.h>

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

Target Job::target(const std::string& at, uint64_t create_size, const std::string& mark) const {
  Target t;
  t.path = at;
  t.direct = direct;
  t.uncached = uncached;
  if (fadvise_hint && !direct) t.fadvise = pattern == "rand" ? POSIX_FADV_RANDOM : POSIX_FADV_SEQUENTIAL;  // as fio's
  t.direction = direction;
  t.create_size = create_size;
  t.create_mark = mark;
  return t;
}

const char* mode_name(Mode mode) {
  for (const Named& m : kModes)
    if (m.mode == mode) return m.name;
  return "?";
}

}  // namespace gds
