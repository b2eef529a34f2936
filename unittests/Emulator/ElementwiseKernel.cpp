//===- ElementwiseKernel.cpp - One instruction over arrays on fdemu -------===//

#include "ElementwiseKernel.h"

namespace flashdecode::emutest {

namespace {

bool isPredicate(PtxType type) { return std::string(type.name) == "pred"; }

/// Registers are declared by size so that any instruction type of that size
/// may use them (PTX's bit-size types); 8-bit values live in 16 bits.
std::string registerType(PtxType type) {
  if (isPredicate(type))
    return ".pred";
  return type.bytes <= 2 ? ".b16" : type.bytes == 4 ? ".b32" : ".b64";
}

/// %pointer = parameter + index * bytes, as a global address.
std::string elementAddress(const std::string &parameter, PtxType type) {
  return "  ld.param.u64 %pointer, [" + parameter +
         "];\n"
         "  cvta.to.global.u64 %pointer, %pointer;\n"
         "  mul.wide.u32 %offset, %index, " +
         std::to_string(type.bytes) +
         ";\n"
         "  add.s64 %pointer, %pointer, %offset;\n";
}

} // namespace

std::string buildElementwisePtx(const std::string &body, PtxType result,
                                const std::vector<PtxType> &sources) {
  static const char *names[] = {"a", "b", "c"};
  std::string ptx = std::string(kPtxHeader) +
                    "\n"
                    ".visible .entry elementwise(.param .u64 result,\n"
                    "    .param .u64 a, .param .u64 b, .param .u64 c,\n"
                    "    .param .u32 count)\n"
                    "{\n"
                    "  .reg .pred %outside;\n"
                    "  .reg .b32 %index, %ctaSize, %thread, %count, %word;\n"
                    "  .reg .b64 %pointer, %offset;\n"
                    "  .reg " +
                    registerType(result) + " %d;\n";
  for (size_t i = 0; i < sources.size(); ++i)
    ptx += "  .reg " + registerType(sources[i]) + " %" + names[i] + ";\n";
  ptx += "  mov.u32 %index, %ctaid.x;\n"
         "  mov.u32 %ctaSize, %ntid.x;\n"
         "  mov.u32 %thread, %tid.x;\n"
         "  mad.lo.u32 %index, %index, %ctaSize, %thread;\n"
         "  ld.param.u32 %count, [count];\n"
         "  setp.ge.u32 %outside, %index, %count;\n"
         "  @%outside bra DONE;\n";
  for (size_t i = 0; i < sources.size(); ++i) {
    ptx += elementAddress(names[i], sources[i]);
    std::string reg = std::string("%") + names[i];
    if (isPredicate(sources[i]))
      ptx += "  ld.global.u32 %word, [%pointer];\n"
             "  setp.ne.u32 " +
             reg + ", %word, 0;\n";
    else
      ptx += std::string("  ld.global.") + sources[i].name + " " + reg +
             ", [%pointer];\n";
  }
  ptx += "  " + body + "\n";
  ptx += elementAddress("result", result);
  if (isPredicate(result))
    ptx += "  selp.u32 %word, 1, 0, %d;\n"
           "  st.global.u32 [%pointer], %word;\n";
  else
    ptx += std::string("  st.global.") + result.name + " [%pointer], %d;\n";
  ptx += "DONE:\n"
         "  ret;\n"
         "}\n";
  return ptx;
}

} // namespace flashdecode::emutest
