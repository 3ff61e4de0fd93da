// Python bindings (module gdsbench._native). Arguments are converted while
// the GIL is held; the whole run then happens without it, and the waiting
// thread re-takes it briefly every few milliseconds only to look for Ctrl-C.
#include <Python.h>
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "copy.hpp"
#include "engine.hpp"
#include "error.hpp"
#include "files.hpp"
#include "gpu/device.hpp"
#include "gpu/status.hpp"
#include "histogram.hpp"
#include "job.hpp"
#include "last_words.hpp"
#include "object_ops.hpp"
#include "offsets.hpp"
#include "pattern.hpp"
#include "read_slots.hpp"
#include "runner.hpp"
#include "sample_reader.hpp"
#include "step_barrier.hpp"
#include "window_rule.hpp"

namespace py = pybind11;
using gds::LatencyHistogram;

namespace {

py::array_t<uint64_t> to_array(const uint64_t* data, size_t n) {
  py::array_t<uint64_t> a(n);
  std::copy(data, data + n, a.mutable_data());
  return a;
}

// A result field as Python sees it (gdsbench.execution.record types them further).
template <typename T>
py::object to_python(const T& value) {
  return py::cast(value);
}
py::object to_python(const std::vector<gds::ThreadResult>& threads);

#define GDS_PUT(type, name, initial) d[#name] = to_python(r.name);
py::dict result_dict(const gds::ThreadResult& r) {
  py::dict d;
  GDS_THREAD_RESULT_FIELDS(GDS_PUT)
  return d;
}

py::dict result_dict(const gds::JobResult& r) {
  py::dict d;
  GDS_JOB_RESULT_FIELDS(GDS_PUT)
  return d;
}
#undef GDS_PUT

py::object to_python(const std::vector<gds::ThreadResult>& threads) {
  py::list out;
  for (const auto& t : threads) out.append(result_dict(t));
  return out;
}

py::tuple field_names(std::initializer_list<const char*> names) {
  py::list out;
  for (const char* n : names) out.append(n);
  return py::tuple(out);
}

// The Python checker of GPU memory (gdsbench.system.pattern.check_device), called
// from worker threads with the GIL taken for each read.
// Made with the GIL held; copies of the function only copy a shared_ptr, so
// they never touch Python reference counts without the GIL.
gds::DeviceVerifyFn device_verifier(const py::object& check) {
  if (check.is_none()) return {};
  auto fn = std::make_shared<py::object>(check);
  return [fn](const void* ptr, size_t length, uint64_t offset, int gpu, std::vector<uint64_t>* bad) -> uint64_t {
    py::gil_scoped_acquire acquire;
    auto offsets = (*fn)(reinterpret_cast<uintptr_t>(ptr), length, offset, gpu).cast<std::vector<uint64_t>>();
    bad->insert(bad->end(), offsets.begin(), offsets.end());
    return offsets.size();
  };
}

// poll(bytes, elapsed_ns, worker_done) is called from the waiting thread
// every few milliseconds with the GIL taken; it returns None or 0 to go on,
// 1 to stop the run (interrupted) or 2 to stonewall. Ctrl-C stops the run
// without it.
py::dict run(const gds::Job& job, const py::object& poll, const py::object& verify_device, const py::object& on_ready) {
  gds::JobResult r;
  std::unique_ptr<py::error_already_set> callback_error;
  auto keep = [&](py::error_already_set& e) { callback_error = std::make_unique<py::error_already_set>(std::move(e)); };
  gds::DeviceVerifyFn verify = device_verifier(verify_device);
  try {
    py::gil_scoped_release release;
    gds::ReadyFn ready;
    if (!on_ready.is_none())
      ready = [&] {
        py::gil_scoped_acquire acquire;
        try {
          on_ready();
        } catch (py::error_already_set& e) {
          keep(e);
          throw gds::IoError("on_ready failed");
        }
      };
    r = gds::run_job(
        job,
        [&](const gds::PollInfo& info) {
          py::gil_scoped_acquire acquire;
          if (PyErr_CheckSignals() != 0) {
            PyErr_Clear();  // the interrupt is reported as result["interrupted"]
            return gds::PollAction::kCancel;
          }
          if (poll.is_none() || callback_error) return gds::PollAction::kContinue;
          try {
            py::object action = poll(info.bytes, info.elapsed_ns, info.worker_done);
            int a = action.is_none() ? 0 : action.cast<int>();
            return a == 1   ? gds::PollAction::kCancel
                   : a == 2 ? gds::PollAction::kStonewall
                            : gds::PollAction::kContinue;
          } catch (py::error_already_set& e) {
            keep(e);
            return gds::PollAction::kCancel;
          } catch (const std::exception& e) {  // a poll returning something that is not an int
            PyErr_SetString(PyExc_TypeError, (std::string("poll callback: ") + e.what()).c_str());
            py::error_already_set err;
            keep(err);
            return gds::PollAction::kCancel;
          }
        },
        verify, ready);
  } catch (...) {
    if (callback_error) throw std::move(*callback_error);  // the Python error behind the failure
    throw;
  }
  if (callback_error) throw std::move(*callback_error);
  return result_dict(r);
}

py::buffer_info contiguous(const py::buffer& b, bool writable) {
  py::buffer_info info = b.request(writable);
  if (info.ndim != 1 || info.itemsize * info.shape[0] != info.size * info.itemsize ||
      (info.strides[0] != info.itemsize))
    throw gds::InputError("pattern buffers must be one-dimensional and contiguous");
  return info;
}

}  // namespace

// What CUDA and cuFile can do here, as gdsbench.system.gpu reads it.
py::dict gpu_status_dict() {
  gds::gpu::GpuStatus s = gds::gpu::gpu_status();
  py::dict d;
  d["built_with_cuda"] = s.built_with_cuda;
  d["cudart_error"] = s.cudart_error;
  d["cudart_path"] = s.cudart_path;
  d["runtime_version"] = s.runtime_version;
  d["driver_version"] = s.driver_version;
  py::list devices;
  for (const auto& dev : s.devices) {
    py::dict x;
    x["index"] = dev.index;
    x["pci_bus_id"] = dev.pci_bus_id;
    x["total_bytes"] = dev.total_bytes;
    x["free_bytes"] = dev.free_bytes;
    devices.append(x);
  }
  d["devices"] = devices;
  d["cufile_error"] = s.cufile_error;
  d["cufile_path"] = s.cufile_path;
  d["nvfs_version"] = std::to_string(s.nvfs_major) + "." + std::to_string(s.nvfs_minor);
  d["compat_allowed"] = s.compat_allowed;
  d["p2pdma_supported"] = s.p2pdma_supported;
  d["max_direct_io_size"] = s.max_direct_io_size;
  return d;
}

// Every engine with its capabilities and options, as gdsbench.job.spec.ENGINE_INFO holds them.
// An engine opened on a target by itself, outside any run (its open may ask a server: GIL released).
std::unique_ptr<gds::Engine> open_alone(const std::string& engine, const std::string& path,
                                        const gds::OptionValues& options) {
  const gds::EngineInfo& info = gds::engine_by_name(engine);
  py::gil_scoped_release release;
  gds::Target target;
  target.path = path;  // read, through the page cache, with no advice
  return info.open(target, 1, options);
}

// What an engine finds when it opens a target: its size, and what it learned of it
// (a server's address and protocol), for gdsbench.system.targets.
py::dict probe_target(const std::string& engine, const std::string& path, const gds::OptionValues& options) {
  std::unique_ptr<gds::Engine> e = open_alone(engine, path, options);
  py::dict d;
  d["size"] = e->size();
  for (const auto& [key, value] : e->describe()) d[key.c_str()] = value;
  return d;
}

// Every file under a folder an engine lists, sorted by path: [(path under the folder, size)].
std::vector<std::pair<std::string, uint64_t>> list_folder(const std::string& engine, const std::string& folder) {
  const gds::EngineInfo& info = gds::engine_by_name(engine);
  if (!info.list) throw gds::InputError("PATH " + folder + ": the " + engine + " engine lists no folders");
  std::vector<std::pair<std::string, uint64_t>> files;
  {
    py::gil_scoped_release release;
    files = info.list(folder);
  }
  std::sort(files.begin(), files.end());
  return files;
}

// `length` bytes at `offset` of a target, in one request of an engine (a pattern check's block).
py::bytes read_range(const std::string& engine, const std::string& path, uint64_t offset, uint32_t length,
                     const gds::OptionValues& options) {
  std::unique_ptr<gds::Engine> e = open_alone(engine, path, options);
  std::string buffer(length, '\0');
  gds::IoRequest r;
  r.buf = buffer.data();
  r.offset = offset;
  r.length = length;
  {
    py::gil_scoped_release release;
    gds::IoRequest* done[1];
    e->queue(&r);
    while (e->reap(1, done, 1) == 0) {
    }
    gds::check_transfer(r, path, false, e->size());
  }
  return py::bytes(buffer.data(), size_t(r.result));
}

py::list engines_list() {
  py::list out;
  for (const auto& e : gds::engines()) {
    py::dict d;
    d["name"] = e.name;
    d["about"] = e.about;
    d["opens"] = gds::opens_name(e.can.opens);
    d["supports_direct"] = e.can.supports_direct;
    d["buffered_flags"] = e.can.buffered_flags;
    d["max_depth"] = e.can.max_depth;
    d["gpu_buffers"] = e.can.gpu_buffers;
    d["registers_gpu_buffers"] = e.can.registers_gpu_buffers;
    py::list directions;
    for (auto dir : {gds::Direction::kRead, gds::Direction::kWrite})
      if (e.can.does(dir)) directions.append(gds::direction_name(dir));
    d["directions"] = py::tuple(directions);
    py::list options;
    for (const auto& o : e.options) {
      py::dict od;
      od["name"] = o.name;
      od["kind"] = o.kind;
      od["help"] = o.help;
      od["default"] = o.fallback;
      od["low"] = o.low;
      od["high"] = o.high;
      od["at_most_depth"] = o.at_most_depth;
      options.append(od);
    }
    d["options"] = options;
    py::dict schemes;  // scheme -> protocol, in the engine's order
    if (e.schemes)
      for (const auto& [scheme, protocol] : e.schemes()) schemes[py::str(scheme)] = py::str(protocol);
    d["schemes"] = schemes;
    d["lists_folders"] = e.list != nullptr;
    d["unavailable"] = e.unavailable_reason();
    out.append(d);
  }
  return out;
}

// A SampleReader's read or write of one region, without the GIL: (bytes, chunks, ns).
template <gds::SampleRead (gds::SampleReader::*Move)(const std::string&, uint64_t, uint64_t)>
py::tuple sample_move(gds::SampleReader& r, const std::string& path, uint64_t offset, uint64_t length) {
  gds::SampleRead out;
  {
    py::gil_scoped_release release;
    out = (r.*Move)(path, offset, length);
  }
  return py::make_tuple(out.bytes, out.chunks, out.ns);
}

PYBIND11_MODULE(_native, m) {
  m.doc() = "gdsbench native core: engines, worker loop, latency histogram";

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const gds::Missing& e) {
      py::object cls = py::module_::import("gdsbench.job.errors").attr("TargetMissing");
      PyErr_SetString(cls.ptr(), e.what());
    } catch (const gds::InputError& e) {
      py::object cls = py::module_::import("gdsbench.job.errors").attr("UsageError");
      PyErr_SetString(cls.ptr(), e.what());
    } catch (const gds::IoError& e) {
      py::object cls = py::module_::import("gdsbench.job.errors").attr("IoFailure");
      PyErr_SetString(cls.ptr(), e.what());
    }
  });

  py::class_<gds::Job> job(m, "Job");
  job.def(py::init<>());
#define GDS_FIELD(type, name) job.def_readwrite(#name, &gds::Job::name);
  GDS_JOB_SPEC_FIELDS(GDS_FIELD)
#undef GDS_FIELD
#define GDS_NAME(type, name) #name,
  job.attr("SPEC_FIELDS") = field_names({GDS_JOB_SPEC_FIELDS(GDS_NAME)});
#undef GDS_NAME
  job.def_property(
      "mode", [](const gds::Job& j) { return std::string(gds::mode_name(j.mode)); },
      [](gds::Job& j, const std::string& name) { j.mode = gds::parse_mode(name); });
  job.def_readwrite("engine_options", &gds::Job::engine_options);
  job.def_property(
      "direction", [](const gds::Job& j) { return std::string(gds::direction_name(j.direction)); },
      [](gds::Job& j, const std::string& name) { j.direction = gds::parse_direction(name); });

  py::class_<gds::WindowRule>(m, "WindowRule", "The measured window's rule (native/window_rule.hpp), for Python loops.")
      .def(py::init([](uint64_t start, uint64_t end, uint64_t budget) { return gds::WindowRule{start, end, budget}; }),
           py::arg("start"), py::arg("end"), py::arg("budget"))
      .def("open_at", &gds::WindowRule::open_at, py::arg("now"))
      .def("counts", &gds::WindowRule::counts, py::arg("completed_at"))
      .def("ended_at", &gds::WindowRule::ended_at, py::arg("now"))
      .def("may_issue", &gds::WindowRule::may_issue, py::arg("now"), py::arg("counted"), py::arg("outstanding"));

  py::class_<LatencyHistogram>(m, "LatencyHistogram")
      .def(py::init<>())
      .def_readonly_static("BUCKETS", &LatencyHistogram::kBuckets)
      .def_static("bucket_low", &LatencyHistogram::bucket_low)
      .def_static("bucket_width", &LatencyHistogram::bucket_width)
      .def_static("bucket_value", &LatencyHistogram::bucket_value)
      .def_static("index_of", &LatencyHistogram::index_of)
      .def(
          "add",
          [](LatencyHistogram& h, py::array_t<uint64_t, py::array::c_style | py::array::forcecast> v) {
            auto r = v.unchecked<1>();
            for (py::ssize_t i = 0; i < r.shape(0); ++i) h.add(r(i));
          },
          "Add latency samples in nanoseconds (an array of non-negative integers).")
      .def("merge", &LatencyHistogram::merge, "Add another histogram's counts into this one.")
      .def("percentile", &LatencyHistogram::percentile, py::arg("p"))
      .def_property_readonly("count", &LatencyHistogram::count)
      .def_property_readonly("min", &LatencyHistogram::min)
      .def_property_readonly("max", &LatencyHistogram::max)
      .def_property_readonly("mean", &LatencyHistogram::mean)
      .def_property_readonly("variance", &LatencyHistogram::variance)
      .def_property_readonly("m2", &LatencyHistogram::m2)
      .def_property_readonly("counts",
                             [](const LatencyHistogram& h) { return to_array(h.counts().data(), h.counts().size()); })
      .def_static(
          "from_state",
          [](py::array_t<uint64_t, py::array::c_style | py::array::forcecast> counts, uint64_t min, uint64_t max,
             double mean, double m2) {
            return LatencyHistogram::from_state(counts.data(), size_t(counts.size()), min, max, mean, m2);
          },
          py::arg("counts"), py::arg("min"), py::arg("max"), py::arg("mean"), py::arg("m2"),
          "Rebuild a histogram from its dense counts and summary statistics (results files).")
      .def(py::pickle(
          [](const LatencyHistogram& h) {
            return py::make_tuple(to_array(h.counts().data(), h.counts().size()), h.min(), h.max(), h.mean(), h.m2());
          },
          [](py::tuple t) {
            auto counts = t[0].cast<py::array_t<uint64_t, py::array::c_style | py::array::forcecast>>();
            return LatencyHistogram::from_state(counts.data(), size_t(counts.size()), t[1].cast<uint64_t>(),
                                                t[2].cast<uint64_t>(), t[3].cast<double>(), t[4].cast<double>());
          }));

  m.def("run", &run, py::arg("job"), py::arg("poll") = py::none(), py::arg("verify_device") = py::none(),
        py::arg("on_ready") = py::none(),
        "Run a job; returns a dict of per-thread results. Ctrl-C ends it promptly with interrupted=True.\n"
        "poll(bytes, elapsed_ns, worker_done) -> None/0 go on, 1 stop, 2 stonewall: called every few ms.\n"
        "verify_device(ptr, length, offset, gpu) -> offsets of bad blocks: checks GPU memory for --verify.\n"
        "on_ready() is called when every worker is set up, just before they start (a barrier's place).");

  m.def("set_library_candidates", &gds::gpu::set_library_candidates, py::arg("library"), py::arg("paths"),
        "Extra files to try when loading libcudart or libcufile (the nvidia-* wheels' copies).");
  m.def("gpu_status", &gpu_status_dict,
        "What CUDA and cuFile can do here: libraries found, devices, nvidia-fs as cuFile sees it.");
  m.def(
      "cufile_stats",
      [] {
        gds::gpu::CufileStats s = gds::gpu::cufile_stats();
        py::dict d;
        d["error"] = s.error;
        d["version"] = s.version;
        d["bytes"] = py::bytes(s.bytes);
        return d;
      },
      "cuFile's own statistics in this process now: the bytes cuFileGetStatsL3 wrote, or why not (error).");

  m.def("engines", &engines_list, "Every engine: capabilities, options, why it cannot run here.");
  m.def(
      "object_ops",
      [](const std::string& op, const std::vector<std::string>& names, unsigned depth, uint64_t size,
         const std::string& mark, uint64_t seed, const gds::OptionValues& options, uint64_t duration_ns,
         unsigned batch) {
        const gds::ObjectOps ops{op, names, depth, size, mark, seed, options, duration_ns, batch};
        gds::ObjectOpsResult r;
        {
          py::gil_scoped_release release;
          r = gds::run_object_ops(ops);
        }
        py::dict d;
        d["latency"] = r.latency;
        d["first_byte"] = r.first_byte;
        d["ops"] = r.ops;
        d["objects"] = r.objects;
        d["bytes"] = r.bytes;
        d["listed"] = r.listed;
        d["connections"] = r.connections;
        d["retries"] = r.retries;
        d["ns"] = r.ns;
        return d;
      },
      py::arg("op"), py::arg("names"), py::arg("depth"), py::arg("size") = 0, py::arg("mark") = "", py::arg("seed") = 1,
      py::arg("options") = gds::OptionValues{}, py::arg("duration_ns") = 0, py::arg("batch") = 1,
      "Object operations (put, head, get, delete; list: each name a prefix, listed whole), one request an object, "
      "depth in flight on kept connections, in this thread (head, get, list with duration_ns: the names again until "
      "it is up; delete with batch: that many objects a request): {latency, first_byte, ops, objects, bytes, listed, "
      "connections, retries, ns}.");
  m.def("probe_target", &probe_target, py::arg("engine"), py::arg("path"), py::arg("options") = gds::OptionValues{},
        "Open an engine on a target alone: {size, and what it learned}; UsageError if it cannot be read.");
  m.def("list_folder", &list_folder, py::arg("engine"), py::arg("folder"),
        "Every file under a folder on a server, at any depth, listed by its engine: [(path under it, size)] in path "
        "order; UsageError if it cannot be listed.");
  m.def("read_range", &read_range, py::arg("engine"), py::arg("path"), py::arg("offset"), py::arg("length"),
        py::arg("options") = gds::OptionValues{},
        "length bytes at offset of a target, read by one request of the engine.");

  m.def("check_gpu_backend", &gds::gpu::check_backend, py::arg("backend"),
        "UsageError unless the --gpu-backend value is cuda or a well-formed sim[:...] (checked before a run).");
  m.def("say_on_sigterm", &gds::say_on_sigterm, py::arg("line"),
        "From now on, SIGTERM writes `line` to stderr and exits with 128 + SIGTERM (safe in any native wait).");

  m.def("resident_fraction", &gds::resident_fraction, py::arg("fd"), py::arg("offset"), py::arg("length"),
        "Fraction of the region's pages of an open file resident in the page cache (mincore).");
  m.def("dio_alignment", &gds::dio_alignment, py::arg("path"),
        "(memory, offset) alignment O_DIRECT needs, from statx; (0, 0) if unknown.");

  m.def(
      "pattern_fill",
      [](py::buffer buf, uint64_t offset, uint64_t seed) {
        py::buffer_info info = contiguous(buf, true);
        size_t len = size_t(info.size * info.itemsize);
        py::gil_scoped_release release;
        gds::pattern::fill(info.ptr, len, offset, seed);
      },
      py::arg("buffer"), py::arg("offset"), py::arg("seed"),
      "Fill a writable buffer with the pattern blocks for file offset `offset`.");
  m.def(
      "pattern_fill_reusable",
      [](py::buffer buf, uint64_t key) {
        py::buffer_info info = contiguous(buf, true);
        size_t len = size_t(info.size * info.itemsize);
        py::gil_scoped_release release;
        gds::pattern::fill_reusable(info.ptr, len, key);
      },
      py::arg("buffer"), py::arg("key"),
      "Fill a writable buffer with pattern blocks a write can move anywhere (pattern.hpp's restamp).");

  m.def("last_level_cache_bytes", &gds::last_level_cache_bytes,
        "The last-level cache's bytes as sysfs gives cpu0's (32 MiB where it does not say).");
  m.def("lands_past_cache", &gds::lands_past_cache, py::arg("bytes_in_flight"),
        "Whether a remote engine's reads, holding bytes_in_flight between them in the process, are copied with "
        "streaming stores (copy.hpp: more than half the last-level cache).");
  m.def(
      "copy_received",
      [](py::buffer dst, py::buffer src, bool past_cache, size_t times) {
        py::buffer_info to = contiguous(dst, true), from = contiguous(src, false);
        const size_t n = size_t(from.size * from.itemsize);
        GDS_EXPECT(n == 0 || size_t(to.size * to.itemsize) / n >= times,
                   "copy_received: the destination is shorter than the source times `times`");
        py::gil_scoped_release release;
        for (size_t i = 0; i < times; ++i)
          gds::copy_received(static_cast<char*>(to.ptr) + i * n, static_cast<const char*>(from.ptr), n, past_cache);
        if (past_cache) gds::streamed_fence();
      },
      py::arg("dst"), py::arg("src"), py::arg("past_cache") = false, py::arg("times") = 1,
      "A remote engine's copy of received bytes into a request's buffer (copy.hpp): src into the start of dst, "
      "`times` times back to back, as a body's pieces arrive through a receive buffer; past_cache: with streaming "
      "stores, as where the requests in flight outgrow the cache, fenced once at the end as the engine does.");
  m.def(
      "pattern_check",
      [](py::buffer buf, uint64_t offset) {
        py::buffer_info info = contiguous(buf, false);
        size_t len = size_t(info.size * info.itemsize);
        std::vector<uint64_t> bad;
        {
          py::gil_scoped_release release;
          gds::pattern::check(info.ptr, len, offset, &bad);
        }
        return py::make_tuple(bad.size(), bad.empty() ? py::object(py::none()) : py::object(py::int_(bad.front())));
      },
      py::arg("buffer"), py::arg("offset"),
      "Check pattern blocks read from file offset `offset`: (bad blocks, offset of the first bad one).");

  py::class_<gds::OffsetSequence>(m, "OffsetSequence",
                                  "The order a worker reads blocks in (the worker loop's own OffsetSequence).")
      .def(
          py::init([](uint64_t first_byte, uint64_t nblocks, uint64_t bs, bool random, uint64_t seed, uint32_t worker) {
            GDS_EXPECT(nblocks > 0 && bs > 0, "an offset sequence needs at least one block");
            return gds::OffsetSequence::for_worker(first_byte, nblocks, bs, random, seed, worker);
          }),
          py::arg("first_byte"), py::arg("nblocks"), py::arg("bs"), py::arg("random"), py::arg("seed"),
          py::arg("worker") = 0)
      .def(
          "take",
          [](gds::OffsetSequence& seq, uint64_t count) {
            py::array_t<uint64_t> out(count);
            auto* p = out.mutable_data();
            for (uint64_t i = 0; i < count; ++i) p[i] = seq.next();
            return out;
          },
          py::arg("count"), "The next `count` byte offsets.");

  // gdsbench train: one SampleReader per read thread; reads run without the GIL.
  py::class_<gds::SampleReader>(m, "SampleReader",
                                "Reads whole samples (file regions) in chunks of job.bs, job.qd in flight.")
      .def(py::init([](const gds::Job& job, int gpu, const py::object& verify_device) {
             return std::make_unique<gds::SampleReader>(job, gpu, device_verifier(verify_device));
           }),
           py::arg("job"), py::arg("gpu") = 0, py::arg("verify_device") = py::none())
      .def("read", &sample_move<&gds::SampleReader::read>, py::arg("path"), py::arg("offset"), py::arg("length"),
           "Read one sample: (bytes, chunks, ns from the first chunk issued to the last landed).")
      .def("write", &sample_move<&gds::SampleReader::write>, py::arg("path"), py::arg("offset"), py::arg("length"),
           "Write one region (a write job's reader): (bytes, chunks, ns from the first chunk issued to the "
           "last landed, and its fsync where the job says fsync_end).")
      .def("reseed", &gds::SampleReader::reseed, py::arg("seed"), py::call_guard<py::gil_scoped_release>(),
           "Refill a writer's payload from this seed: the files or objects it writes next are its own "
           "bytes (pattern.file_seed).")
      .def(
          "create",
          [](gds::SampleReader& r, const std::string& path, uint64_t length, const std::string& mark) {
            gds::SampleRead out;
            {
              py::gil_scoped_release release;
              out = r.create(path, length, mark);
            }
            return py::make_tuple(out.bytes, out.chunks, out.ns);
          },
          py::arg("path"), py::arg("length"), py::arg("mark"),
          "Create a new object of length bytes, written whole with the pattern and carrying mark, where none is "
          "there (a write job's writer): (bytes, chunks, ns).")
      .def_property_readonly("latency", &gds::SampleReader::latency, "Per-chunk latency, issue to landing.")
      .def_property_readonly("verified_blocks", &gds::SampleReader::verified_blocks)
      .def_property_readonly("verify_mismatches", &gds::SampleReader::verify_mismatches)
      .def_property_readonly("first_mismatch_offset", &gds::SampleReader::first_mismatch_offset)
      .def_property_readonly("first_mismatch_path", &gds::SampleReader::first_mismatch_path);

  py::class_<gds::StepBarrier>(m, "StepBarrier", "A barrier for processes, in memory they all map.")
      .def(py::init([](py::buffer memory, uint32_t parties) {
             py::buffer_info info = contiguous(memory, true);
             GDS_EXPECT(size_t(info.size * info.itemsize) >= sizeof(gds::BarrierState),
                        "the step barrier needs " + std::to_string(sizeof(gds::BarrierState)) + " bytes of memory");
             return std::make_unique<gds::StepBarrier>(info.ptr, parties);
           }),
           py::arg("memory"), py::arg("parties") = 0, py::keep_alive<1, 2>(),
           "parties > 0: initialise the shared memory for that many; 0: join one made by another process.")
      .def("wait", &gds::StepBarrier::wait, py::call_guard<py::gil_scoped_release>(),
           "Wait for every party; the nanoseconds waited. IoFailure once aborted.")
      .def("abort", &gds::StepBarrier::abort, "Release every waiter with an error (a party failed).")
      .def_property_readonly("parties", &gds::StepBarrier::parties);
  m.attr("BARRIER_BYTES") = sizeof(gds::BarrierState);

#define GDS_NAME(type, name, initial) #name,
  m.attr("MAX_ROUND_HISTOGRAMS") = gds::kMaxRoundHistograms;
  m.attr("THREAD_RESULT_FIELDS") = field_names({GDS_THREAD_RESULT_FIELDS(GDS_NAME)});
  m.attr("JOB_RESULT_FIELDS") = field_names({GDS_JOB_RESULT_FIELDS(GDS_NAME)});
#undef GDS_NAME
  m.attr("MAX_BS") = gds::kMaxBlock;
  m.attr("MAX_THREADS") = gds::kMaxThreads;
  m.attr("PATTERN_BLOCK") = gds::pattern::kBlock;
  m.attr("PATTERN_MAGIC") = gds::pattern::kMagic;
  m.attr("PATTERN_GOLDEN") = gds::pattern::kGolden;
}
