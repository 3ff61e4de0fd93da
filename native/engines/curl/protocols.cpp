// Every protocol the curl engine speaks: each defined by its own file here.
#include "../../error.hpp"
#include "protocol.hpp"

namespace gds::remote {

extern const Protocol kHttp, kS3, kFtp;  // a new protocol: its name here and in the list below

const std::vector<Protocol>& protocols() {
  static const std::vector<Protocol> all = {kHttp, kS3, kFtp};
  return all;
}

std::vector<std::pair<std::string, std::string>> schemes() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& p : protocols())
    for (const auto& scheme : p.schemes) out.emplace_back(scheme, p.name);
  return out;
}

std::unique_ptr<Endpoint> resolve(const std::string& name) {
  for (const auto& p : protocols())
    for (const auto& scheme : p.schemes)
      if (name.rfind(scheme, 0) == 0) return p.resolve(name);
  std::string known;
  for (const auto& s : schemes()) known += (known.empty() ? "" : ", ") + s.first;
  throw InputError("PATH " + name + ": the curl engine reads " + known + " URLs");
}

}  // namespace gds::remote
