//===- EmulatorErrorTest.h - Checking fdemu's fault reports ----*- C++ -*-===//
//
// The fixture of the tests that provoke faults (EmulatorErrorTest.cpp,
// WarpMatrixErrorTest.cpp): a report must locate the fault by kernel, PTX
// line, instruction, block and thread.
//
//===----------------------------------------------------------------------===//

#ifndef FD_UNITTESTS_EMULATOR_EMULATORERRORTEST_H
#define FD_UNITTESTS_EMULATOR_EMULATORERRORTEST_H

#include "EmulatorHarness.h"

#include <gmock/gmock.h>

#include <cstdio>

namespace flashdecode::emutest {

/// The 1-based line of `ptx` holding `needle`.
inline int lineOf(const std::string &ptx, const std::string &needle) {
  size_t at = ptx.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  int line = 1;
  for (size_t i = 0; i < at && i < ptx.size(); ++i)
    line += ptx[i] == '\n';
  return line;
}

inline std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx",
                static_cast<unsigned long long>(value));
  return text;
}

class EmulatorError : public EmulatorTest {
protected:
  /// Expects `report` to locate the fault: kernel, PTX line of `needle`,
  /// its opcode, block and thread.
  void expectLocated(const std::string &report, const std::string &kernel,
                     const std::string &ptx, const std::string &needle,
                     const std::string &block, const std::string &thread) {
    EXPECT_THAT(report, testing::HasSubstr("kernel " + kernel + ":"));
    EXPECT_THAT(report,
                testing::HasSubstr("PTX line " +
                                   std::to_string(lineOf(ptx, needle)) + ":"));
    EXPECT_THAT(report, testing::HasSubstr(needle.substr(0, needle.find(' '))));
    EXPECT_THAT(report, testing::HasSubstr("block (" + block + ")"));
    EXPECT_THAT(report, testing::HasSubstr("thread (" + thread + ")"));
  }
};

} // namespace flashdecode::emutest

#endif // FD_UNITTESTS_EMULATOR_EMULATORERRORTEST_H
