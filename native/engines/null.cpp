// null: completes every request, either way, at once without touching
// storage or memory.
// What it measures is the harness's own floor: the worker loop, clock reads
// and histogram updates (fio's engines/null.c plays the same part).
#include "../engine.hpp"

namespace gds {
namespace {

class NullEngine final : public Engine {
 public:
  explicit NullEngine(unsigned depth) : queued_(depth) {}
  void queue(IoRequest* r) override {
    r->result = r->length;
    queued_[n_++] = r;
  }
  unsigned reap(unsigned, IoRequest** done, unsigned max) override {
    unsigned n = n_ < max ? n_ : max;
    for (unsigned i = 0; i < n; ++i) done[i] = queued_[n_ - n + i];
    n_ -= n;
    return n;
  }

 private:
  std::vector<IoRequest*> queued_;
  unsigned n_ = 0;
};

}  // namespace

const EngineInfo kNullEngine = {
    "null",
    "no I/O: measures the harness's own per-request floor",
    {Opens::kNothing, /*supports_direct=*/true, /*buffered_flags=*/false, /*max_depth=*/65536, kReadWrite,
     /*gpu_buffers=*/false},
    [](const Target&, unsigned depth, const OptionValues&) -> std::unique_ptr<Engine> {
      return std::make_unique<NullEngine>(depth);
    },
    []() { return std::string(); },
    {}};

}  // namespace gds
