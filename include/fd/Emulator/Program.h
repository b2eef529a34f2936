//===- Program.h - PTX decoded once into a compact form ---------*- C++ -*-===//
//
// fdemu executes PTX from this form, never from text: every instruction's
// opcode, types and modifiers are enums, register names are indices into a
// per-thread register file (special registers such as %tid.x included),
// immediates are raw bits and branch targets are instruction indices.
// Standard C++ only.
//
//===----------------------------------------------------------------------===//

#ifndef FD_EMULATOR_PROGRAM_H
#define FD_EMULATOR_PROGRAM_H

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace flashdecode::emu {

/// PTX's fundamental types. Registers hold raw bits: the type says how an
/// instruction reads them.
enum class Type : uint8_t {
  None,
  Pred,
  B8,
  B16,
  B32,
  B64,
  U8,
  U16,
  U32,
  U64,
  S8,
  S16,
  S32,
  S64,
  F16,
  F16x2,
  BF16,
  BF16x2,
  F32,
  F64,
  /// Two fp8 values packed in 16 bits (the low byte is element 0): only
  /// as the source of cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2}.
  E4M3x2,
  E5M2x2,
};

/// Size in bytes (predicates: 1). Inline, as are the two predicates below:
/// the interpreter asks them for every lane of most instructions.
inline unsigned getTypeSize(Type type) {
  switch (type) {
  case Type::None:
    return 0;
  case Type::Pred:
  case Type::B8:
  case Type::U8:
  case Type::S8:
    return 1;
  case Type::B16:
  case Type::U16:
  case Type::S16:
  case Type::F16:
  case Type::BF16:
  case Type::E4M3x2:
  case Type::E5M2x2:
    return 2;
  case Type::B32:
  case Type::U32:
  case Type::S32:
  case Type::F32:
  case Type::F16x2:
  case Type::BF16x2:
    return 4;
  case Type::B64:
  case Type::U64:
  case Type::S64:
  case Type::F64:
    return 8;
  }
  return 0;
}

inline bool isSigned(Type type) {
  return type == Type::S8 || type == Type::S16 || type == Type::S32 ||
         type == Type::S64;
}

inline bool isFloat(Type type) {
  return type == Type::F16 || type == Type::F16x2 || type == Type::BF16 ||
         type == Type::BF16x2 || type == Type::F32 || type == Type::F64 ||
         type == Type::E4M3x2 || type == Type::E5M2x2;
}

const char *getTypeName(Type type);

enum class Opcode : uint8_t {
  // Integer and bitwise.
  Add,
  Sub,
  Mul,
  Mad,
  Div,
  Rem,
  Min,
  Max,
  Abs,
  Neg,
  And,
  Or,
  Xor,
  Not,
  CNot,
  Shl,
  Shr,
  Bfe,
  Bfi,
  Prmt,
  Lop3,
  Popc,
  Clz,
  Brev,
  // Floating point (Add/Sub/Mul/Mad/Min/Max/Abs/Neg/Div shared above).
  Fma,
  Rcp,
  Sqrt,
  Rsqrt,
  Ex2,
  Lg2,
  Sin,
  Cos,
  Tanh,
  // Comparison, selection, conversion, movement.
  Setp,
  Selp,
  Cvt,
  Cvta,
  Mov,
  // Memory.
  Ld,
  St,
  Atom,
  Red,
  // Warp and CTA.
  Shfl,
  Vote,
  Activemask,
  BarSync,
  BarWarpSync,
  Membar,
  // Tensor cores and asynchronous copies (sm_80+).
  Mma,
  Ldmatrix,
  CpAsync,
  CpAsyncCommit,
  CpAsyncWait,
  CpAsyncWaitAll,
  // Warpgroup tensor cores (sm_90a): wgmma.mma_async, wgmma.fence,
  // wgmma.commit_group, wgmma.wait_group.
  WarpgroupMma,
  WarpgroupFence,
  WarpgroupCommit,
  WarpgroupWait,
  // Programmatic dependent launch (sm_90+): griddepcontrol.wait and
  // griddepcontrol.launch_dependents.
  GridDependencyWait,
  LaunchDependents,
  // Thread block clusters (sm_90+): barrier.cluster.arrive,
  // barrier.cluster.wait and mapa.shared::cluster.
  ClusterArrive,
  ClusterWait,
  Mapa,
  // Control.
  Bra,
  Ret,
  Exit,
  Trap,
  Nop,
};

/// The counter class an opcode falls in (the performance model's units).
enum class InstructionClass : uint8_t {
  FloatArithmetic,
  SpecialFunction,
  Conversion,
  Shuffle,
  IntegerOther,
  GlobalLoad,
  GlobalStore,
  SharedLoad,
  SharedStore,
  Barrier,
  Control,
  /// mma.sync and wgmma.mma_async (appended: the classes before keep their
  /// counter indices).
  TensorCore,
  Count,
};
const char *getInstructionClassName(InstructionClass kind);

enum class StateSpace : uint8_t {
  Generic,
  Global,
  Shared,
  Local,
  Param,
  Const,
  /// .shared::cluster: the shared memory of any CTA of the cluster, at the
  /// addresses mapa gives (a .shared::cta address is the CTA's own).
  SharedCluster
};
enum class Rounding : uint8_t { None, Rn, Rz, Rm, Rp, Rni, Rzi, Rmi, Rpi };
enum class Compare : uint8_t {
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  Lo,
  Ls,
  Hi,
  Hs,
  Equ,
  Neu,
  Ltu,
  Leu,
  Gtu,
  Geu,
  Num,
  Nan,
};
enum class BoolOp : uint8_t { None, And, Or, Xor };
enum class ShuffleMode : uint8_t { Up, Down, Bfly, Idx };
enum class VoteMode : uint8_t { All, Any, Uni, Ballot };
enum class AtomicOp : uint8_t {
  Add,
  Min,
  Max,
  Exch,
  Cas,
  And,
  Or,
  Xor,
  Inc,
  Dec,
};

/// The few special registers kernels read; they live in the register file
/// at fixed indices, set when a warp starts.
enum SpecialRegister : uint32_t {
  TidX,
  TidY,
  TidZ,
  NtidX,
  NtidY,
  NtidZ,
  CtaidX,
  CtaidY,
  CtaidZ,
  NctaidX,
  NctaidY,
  NctaidZ,
  LaneId,
  WarpId,
  NWarpId,
  LanemaskEq,
  LanemaskLt,
  LanemaskLe,
  LanemaskGt,
  LanemaskGe,
  SmId,
  DynamicSmemSize,
  Clock,
  Clock64,
  // Thread block clusters: the CTA's rank and position in its cluster, the
  // cluster's size and dimensions, the cluster's position in the grid and
  // the grid's clusters, and whether the launch named a cluster size.
  ClusterCtaRank,
  ClusterNCtaRank,
  ClusterCtaIdX,
  ClusterCtaIdY,
  ClusterCtaIdZ,
  ClusterNCtaIdX,
  ClusterNCtaIdY,
  ClusterNCtaIdZ,
  ClusterIdX,
  ClusterIdY,
  ClusterIdZ,
  NClusterIdX,
  NClusterIdY,
  NClusterIdZ,
  IsExplicitCluster,
  NumSpecialRegisters,
};

constexpr uint32_t kNoRegister = ~0u;

struct Operand {
  enum class Kind : uint8_t { None, Register, Immediate, Address, Vector };
  Kind kind = Kind::None;
  /// Register: negate a predicate operand (`!%p1`).
  bool negated = false;
  /// Vector: number of elements (2 or 4).
  uint8_t count = 0;
  /// Register index; Address: base register or kNoRegister; Vector:
  /// elements (kNoRegister for the `_` sink and for immediate elements,
  /// whose bits are in `elementValues`).
  uint32_t registers[4] = {kNoRegister, kNoRegister, kNoRegister, kNoRegister};
  /// Immediate bits, or an address's constant offset (symbol included).
  uint64_t value = 0;
  /// Vector: the bits of each immediate element, by position (0 for
  /// register elements and sinks).
  uint64_t elementValues[4] = {};

  /// The entries of `registers` it names: a vector's elements, a register,
  /// an address's base (kNoRegister where there is none).
  unsigned getNumRegisters() const {
    return kind == Kind::Vector                              ? count
           : kind == Kind::Register || kind == Kind::Address ? 1
                                                             : 0;
  }
};

struct Instruction {
  Opcode opcode = Opcode::Nop;
  InstructionClass kind = InstructionClass::IntegerOther;
  Type type = Type::None;
  /// cvt: the source type; mul/mad .wide: the source type (type is the
  /// result); setp/selp/slct: unused.
  Type sourceType = Type::None;
  Rounding rounding = Rounding::None;
  Compare compare = Compare::Eq;
  BoolOp boolOp = BoolOp::None;
  StateSpace space = StateSpace::Generic;
  ShuffleMode shuffleMode = ShuffleMode::Bfly;
  VoteMode voteMode = VoteMode::All;
  AtomicOp atomicOp = AtomicOp::Add;
  bool ftz = false, saturate = false, approximate = false, propagateNaN = false;
  /// cvt .relu: negative results (and -0) become +0, NaN the canonical NaN.
  bool relu = false;
  /// cvta.to.<space> (generic to space) rather than cvta.<space>.
  bool toSpace = false;
  /// mul/mad: .lo (default), .hi, .wide.
  bool high = false, wide = false;
  /// ld/st/atom: vector width (1, 2 or 4).
  uint8_t vectorWidth = 1;
  /// mma: the K of its m16n8kK shape (8 or 16); ldmatrix: the number of
  /// 8x8 matrices (.x1, .x2, .x4).
  uint8_t shape = 0;
  /// ldmatrix: .trans.
  bool transpose = false;
  /// wgmma.mma_async: the N of its m64nNk16 shape; its operand d, the N / 2
  /// accumulator registers (operands[0] is then an empty vector); whether
  /// imm-scale-a / imm-scale-b are -1 (the operand negated) and
  /// imm-trans-a / imm-trans-b are 1 (the operand MN-major in shared
  /// memory). Its operands are d, a (a descriptor, or a vector of four
  /// registers), b's descriptor and scale-d.
  uint16_t warpgroupColumns = 0;
  bool negateA = false, negateB = false;
  bool transposeA = false, transposeB = false;
  std::vector<uint32_t> accumulators;
  /// barrier.cluster.arrive / wait: .aligned (every lane of the warp
  /// executes it together).
  bool aligned = false;
  /// cp.async: .cg (through L2 only: 16-byte copies only), and
  /// .L2::cache_hint (a cache-policy operand comes last).
  bool cacheGlobal = false, cacheHint = false;
  /// Guard predicate (`@%p` / `@!%p`), or kNoRegister.
  uint32_t guard = kNoRegister;
  bool guardNegated = false;
  uint8_t numOperands = 0;
  /// Destinations first (setp/shfl: a second destination predicate is
  /// `secondDestination`), then sources; bra: value = target index.
  /// cp.async: destination address, source address, cp-size, then the
  /// optional src-size and cache policy; cp.async.wait_group: N.
  Operand operands[5];
  uint32_t secondDestination = kNoRegister;
  /// 1-based line in the PTX text, for reports.
  uint32_t line = 0;
  /// The instruction as written, for reports.
  std::string text;
};

/// One .entry: its parameters, shared and local memory, code.
struct Kernel {
  std::string name;
  struct Parameter {
    std::string name;
    uint32_t offset = 0, size = 0;
  };
  std::vector<Parameter> parameters;
  uint32_t parameterBytes = 0;
  uint32_t staticSharedBytes = 0;
  /// Dynamic shared memory starts here (after the static variables).
  uint32_t dynamicSharedOffset = 0;
  uint32_t localBytes = 0;
  uint32_t numRegisters = NumSpecialRegisters;
  std::vector<Instruction> code;
  /// .reqntid/.maxntid when given (0 otherwise).
  uint32_t maxThreads = 0;
  /// .reqnctapercluster when given (0 otherwise): the cluster every launch
  /// of the kernel has; .explicitcluster: launches must name one;
  /// .maxclusterrank: the most CTAs a launch's cluster may have (0: no
  /// limit of the kernel's own).
  uint32_t requiredCluster[3] = {0, 0, 0};
  bool explicitCluster = false;
  uint32_t maxClusterRank = 0;

  /// Shared memory a CTA gets with `dynamicBytes` of dynamic shared memory.
  uint32_t getSharedBytes(uint32_t dynamicBytes) const {
    return dynamicBytes
               ? std::max(staticSharedBytes, dynamicSharedOffset + dynamicBytes)
               : staticSharedBytes;
  }
};

struct Module {
  std::string target;
  /// The .version directive as major * 10 + minor (8.1 is 81); 0 without
  /// one.
  unsigned ptxVersion = 0;
  std::map<std::string, std::shared_ptr<const Kernel>> kernels;
};

/// Thrown by the parser: "PTX line N: <what>" names the line and the
/// unsupported or malformed thing.
struct ParseError {
  std::string message;
};

/// Parses a whole PTX module; throws ParseError.
Module parseModule(const std::string &ptx);

} // namespace flashdecode::emu

#endif // FD_EMULATOR_PROGRAM_H
