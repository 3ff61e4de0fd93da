#include "../engine.hpp"
#include "../error.hpp"

namespace gds {

const std::vector<EngineInfo>& engines() {
  static const std::vector<EngineInfo> all = {kNullEngine,   kPsyncEngine,       kIoUringEngine,
                                              kCuFileEngine, kCuFileBatchEngine, kCuFileAsyncEngine,
                                              kCurlEngine,   kNfsEngine,         kSmbEngine};
  return all;
}

const EngineInfo& engine_by_name(const std::string& name) {
  std::string known;
  for (const auto& e : engines()) {
    if (name == e.name) return e;
    known += (known.empty() ? "" : ", ") + std::string(e.name);
  }
  throw InputError("--engine " + name + ": unknown engine; choose one of " + known);
}

}  // namespace gds
