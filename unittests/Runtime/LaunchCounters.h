//===- LaunchCounters.h - fdemu's counters of a test's launch ---*- C++ -*-===//
//
// The tests that read what a launch executed (instructions, bytes, bank
// conflicts) from fdemu's counters (fd/Emulator/Emulator.h): its entry
// points, found in the loaded driver library, which a GPU's driver lacks.
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_RUNTIME_LAUNCHCOUNTERS_H
#define FD_UNITTESTS_RUNTIME_LAUNCHCOUNTERS_H

#include "fd/Emulator/Emulator.h"
#include "fd/Runtime/Driver.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <functional>
#include <memory>
#include <optional>

namespace flashdecode::test {

class LaunchCounters {
public:
  /// The loaded driver's counters; none when it is not fdemu (the caller
  /// skips).
  static std::optional<LaunchCounters> find() {
    void *library =
        dlopen(rt::getDriverLibraryName().c_str(), RTLD_NOW | RTLD_NOLOAD);
    LaunchCounters counters;
    counters.record = reinterpret_cast<void (*)(int)>(
        library ? dlsym(library, "fdemuRecordLaunches") : nullptr);
    counters.get = reinterpret_cast<int (*)(int, FdemuCounters *)>(
        library ? dlsym(library, "fdemuGetLaunchCounters") : nullptr);
    if (!counters.record || !counters.get)
      return std::nullopt;
    return counters;
  }

  /// The counters of the first launch `run` queues (and waits for).
  std::unique_ptr<FdemuCounters>
  ofFirstLaunch(const std::function<void()> &run) const {
    record(1);
    run();
    auto counters = std::make_unique<FdemuCounters>();
    EXPECT_EQ(get(0, counters.get()), 0);
    record(0);
    return counters;
  }

private:
  void (*record)(int) = nullptr;
  int (*get)(int, FdemuCounters *) = nullptr;
};

} // namespace flashdecode::test

#endif // FD_UNITTESTS_RUNTIME_LAUNCHCOUNTERS_H
