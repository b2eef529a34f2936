//===- Opcodes.cpp - PTX opcode words into decoded instructions ----------===//
//
// `ld.global.nc.v4.b32` becomes Opcode::Ld with space Global, vector width 4
// and type B32. A modifier this emulator does not know is an error naming
// it: executing an instruction with a modifier silently ignored could give
// a wrong value.
//
//===----------------------------------------------------------------------===//

#include "Opcodes.h"

#include "fd/Emulator/Emulator.h"

#include <cstdlib>
#include <iterator>
#include <unordered_map>

namespace flashdecode::emu {

static const std::unordered_map<std::string, Type> &typeNames() {
  static const std::unordered_map<std::string, Type> names = {
      {"pred", Type::Pred}, {"b8", Type::B8},         {"b16", Type::B16},
      {"b32", Type::B32},   {"b64", Type::B64},       {"u8", Type::U8},
      {"u16", Type::U16},   {"u32", Type::U32},       {"u64", Type::U64},
      {"s8", Type::S8},     {"s16", Type::S16},       {"s32", Type::S32},
      {"s64", Type::S64},   {"f16", Type::F16},       {"f16x2", Type::F16x2},
      {"bf16", Type::BF16}, {"bf16x2", Type::BF16x2}, {"f32", Type::F32},
      {"f64", Type::F64}};
  return names;
}

std::optional<Type> parseTypeName(const std::string &name) {
  auto found = typeNames().find(name);
  if (found == typeNames().end())
    return std::nullopt;
  return found->second;
}

const char *getTypeName(Type type) {
  if (type == Type::E4M3x2 || type == Type::E5M2x2)
    return type == Type::E4M3x2 ? "e4m3x2" : "e5m2x2";
  for (const auto &[name, value] : typeNames())
    if (value == type)
      return name.c_str();
  return "none";
}

const char *getInstructionClassName(InstructionClass kind) {
  static const char *const names[] = {FDEMU_CLASS_NAMES};
  static_assert(std::size(names) ==
                static_cast<size_t>(InstructionClass::Count));
  size_t index = static_cast<size_t>(kind);
  return index < std::size(names) ? names[index] : "?";
}

namespace {

const std::unordered_map<std::string, Opcode> &baseOpcodes() {
  static const std::unordered_map<std::string, Opcode> names = {
      {"add", Opcode::Add},
      {"sub", Opcode::Sub},
      {"mul", Opcode::Mul},
      {"mad", Opcode::Mad},
      {"div", Opcode::Div},
      {"rem", Opcode::Rem},
      {"min", Opcode::Min},
      {"max", Opcode::Max},
      {"abs", Opcode::Abs},
      {"neg", Opcode::Neg},
      {"and", Opcode::And},
      {"or", Opcode::Or},
      {"xor", Opcode::Xor},
      {"not", Opcode::Not},
      {"cnot", Opcode::CNot},
      {"shl", Opcode::Shl},
      {"shr", Opcode::Shr},
      {"bfe", Opcode::Bfe},
      {"bfi", Opcode::Bfi},
      {"prmt", Opcode::Prmt},
      {"popc", Opcode::Popc},
      {"clz", Opcode::Clz},
      {"brev", Opcode::Brev},
      {"fma", Opcode::Fma},
      {"rcp", Opcode::Rcp},
      {"sqrt", Opcode::Sqrt},
      {"rsqrt", Opcode::Rsqrt},
      {"ex2", Opcode::Ex2},
      {"lg2", Opcode::Lg2},
      {"sin", Opcode::Sin},
      {"cos", Opcode::Cos},
      {"tanh", Opcode::Tanh},
      {"setp", Opcode::Setp},
      {"selp", Opcode::Selp},
      {"cvt", Opcode::Cvt},
      {"cvta", Opcode::Cvta},
      {"mov", Opcode::Mov},
      {"ld", Opcode::Ld},
      {"ldu", Opcode::Ld},
      {"st", Opcode::St},
      {"atom", Opcode::Atom},
      {"red", Opcode::Red},
      {"shfl", Opcode::Shfl},
      {"vote", Opcode::Vote},
      {"activemask", Opcode::Activemask},
      {"bar", Opcode::BarSync},
      {"barrier", Opcode::BarSync},
      {"membar", Opcode::Membar},
      {"fence", Opcode::Membar},
      {"bra", Opcode::Bra},
      {"ret", Opcode::Ret},
      {"exit", Opcode::Exit},
      {"trap", Opcode::Trap},
      {"brkpt", Opcode::Trap},
      {"nanosleep", Opcode::Nop},
      {"pmevent", Opcode::Nop},
      {"lop3", Opcode::Lop3}};
  return names;
}

/// Modifiers that change nothing an emulator computes (caching, memory
/// ordering scopes on a sequentially consistent emulator, alignment hints).
bool isIgnoredModifier(const std::string &m) {
  static const char *ignored[] = {
      "nc",   "ca",       "cg",      "cs",      "lu",      "cv",      "wb",
      "wt",   "volatile", "relaxed", "acquire", "release", "acq_rel", "sc",
      "weak", "cta",      "gpu",     "sys",     "cluster", "uni",     "aligned",
      "sync", "full",     "noftz",   "unified", "gl"};
  for (const char *name : ignored)
    if (m == name)
      return true;
  // Cache eviction hints: L1::evict_last, L2::64B, ...
  return m.find("::") != std::string::npos;
}

} // namespace

std::vector<std::string> splitModifiers(const std::string &word) {
  std::vector<std::string> modifiers;
  for (size_t dot = word.find('.'); dot != std::string::npos;) {
    size_t next = word.find('.', dot + 1);
    modifiers.push_back(word.substr(
        dot + 1, next == std::string::npos ? next : next - dot - 1));
    dot = next;
  }
  return modifiers;
}

std::string decodeOpcode(const std::string &word, Instruction &inst) {
  size_t dot = word.find('.');
  std::string base = word.substr(0, dot);
  // Fixed-form instructions: each family decodes (and checks) its own.
  if (base == "mma" || base == "ldmatrix")
    return decodeTensorCoreOpcode(base, splitModifiers(word), inst);
  if (base == "cp")
    return decodeAsyncCopyOpcode(splitModifiers(word), inst);
  if (base == "wgmma")
    return decodeWarpgroupOpcode(splitModifiers(word), inst);
  if (base == "mapa" || word.rfind("barrier.cluster.", 0) == 0)
    return decodeClusterOpcode(base, splitModifiers(word), inst);
  // fdemu has one memory proxy: shared-memory writes are visible to
  // wgmma.mma_async's operand reads (the async proxy) without this fence.
  if (word == "fence.proxy.async" || word == "fence.proxy.async.shared::cta") {
    inst.opcode = Opcode::Nop;
    return "";
  }
  if (base == "griddepcontrol") {
    if (word == "griddepcontrol.wait")
      inst.opcode = Opcode::GridDependencyWait;
    else if (word == "griddepcontrol.launch_dependents")
      inst.opcode = Opcode::LaunchDependents;
    else
      return "unsupported form '" + word +
             "' (fdemu runs griddepcontrol.wait and "
             "griddepcontrol.launch_dependents)";
    return "";
  }
  auto found = baseOpcodes().find(base);
  if (found == baseOpcodes().end())
    return "unsupported instruction '" + base + "'";
  inst.opcode = found->second;
  bool sawCompare = false;
  std::vector<Type> types;
  while (dot != std::string::npos) {
    size_t next = word.find('.', dot + 1);
    std::string m =
        word.substr(dot + 1, next == std::string::npos ? std::string::npos
                                                       : next - dot - 1);
    dot = next;
    if (auto type = parseTypeName(m)) {
      types.push_back(*type);
      continue;
    }
    static const std::unordered_map<std::string, StateSpace> spaces = {
        {"global", StateSpace::Global},
        {"shared", StateSpace::Shared},
        {"shared::cta", StateSpace::Shared},
        {"local", StateSpace::Local},
        {"param", StateSpace::Param},
        {"const", StateSpace::Const},
        {"shared::cluster", StateSpace::SharedCluster}};
    static const std::unordered_map<std::string, Rounding> roundings = {
        {"rn", Rounding::Rn},   {"rz", Rounding::Rz},   {"rm", Rounding::Rm},
        {"rp", Rounding::Rp},   {"rni", Rounding::Rni}, {"rzi", Rounding::Rzi},
        {"rmi", Rounding::Rmi}, {"rpi", Rounding::Rpi}};
    static const std::unordered_map<std::string, Compare> compares = {
        {"eq", Compare::Eq},   {"ne", Compare::Ne},   {"lt", Compare::Lt},
        {"le", Compare::Le},   {"gt", Compare::Gt},   {"ge", Compare::Ge},
        {"lo", Compare::Lo},   {"ls", Compare::Ls},   {"hi", Compare::Hi},
        {"hs", Compare::Hs},   {"equ", Compare::Equ}, {"neu", Compare::Neu},
        {"ltu", Compare::Ltu}, {"leu", Compare::Leu}, {"gtu", Compare::Gtu},
        {"geu", Compare::Geu}, {"num", Compare::Num}, {"nan", Compare::Nan}};
    static const std::unordered_map<std::string, AtomicOp> atomics = {
        {"add", AtomicOp::Add}, {"min", AtomicOp::Min},
        {"max", AtomicOp::Max}, {"exch", AtomicOp::Exch},
        {"cas", AtomicOp::Cas}, {"and", AtomicOp::And},
        {"or", AtomicOp::Or},   {"xor", AtomicOp::Xor},
        {"inc", AtomicOp::Inc}, {"dec", AtomicOp::Dec}};
    bool isAtomic = inst.opcode == Opcode::Atom || inst.opcode == Opcode::Red;
    if (auto s = spaces.find(m); s != spaces.end()) {
      inst.space = s->second;
    } else if (auto r = roundings.find(m); r != roundings.end()) {
      inst.rounding = r->second;
    } else if (auto a = atomics.find(m); isAtomic && a != atomics.end()) {
      inst.atomicOp = a->second;
    } else if (auto c = compares.find(m); inst.opcode == Opcode::Setp &&
                                          !sawCompare && c != compares.end()) {
      inst.compare = c->second;
      sawCompare = true;
    } else if (inst.opcode == Opcode::Setp && sawCompare &&
               (m == "and" || m == "or" || m == "xor")) {
      inst.boolOp = m == "and"  ? BoolOp::And
                    : m == "or" ? BoolOp::Or
                                : BoolOp::Xor;
    } else if (inst.opcode == Opcode::Cvt && (m == "e4m3x2" || m == "e5m2x2")) {
      // Packed fp8 types exist only in cvt (not in .reg, ld or arithmetic).
      types.push_back(m == "e4m3x2" ? Type::E4M3x2 : Type::E5M2x2);
    } else if (inst.opcode == Opcode::Cvt && m == "relu") {
      inst.relu = true;
    } else if (m == "to" && inst.opcode == Opcode::Cvta) {
      inst.toSpace = true;
    } else if (m == "ftz") {
      inst.ftz = true;
    } else if (m == "sat" || m == "satfinite") {
      inst.saturate = true;
    } else if (m == "approx") {
      inst.approximate = true;
    } else if (m == "NaN") {
      inst.propagateNaN = true;
    } else if (m == "hi") {
      inst.high = true;
    } else if (m == "lo") {
    } else if (m == "wide") {
      inst.wide = true;
    } else if (m == "v2" || m == "v4") {
      inst.vectorWidth = m == "v2" ? 2 : 4;
    } else if (inst.opcode == Opcode::Shfl &&
               (m == "up" || m == "down" || m == "bfly" || m == "idx")) {
      inst.shuffleMode = m == "up"     ? ShuffleMode::Up
                         : m == "down" ? ShuffleMode::Down
                         : m == "bfly" ? ShuffleMode::Bfly
                                       : ShuffleMode::Idx;
    } else if (inst.opcode == Opcode::Vote &&
               (m == "all" || m == "any" || m == "uni" || m == "ballot")) {
      inst.voteMode = m == "all"   ? VoteMode::All
                      : m == "any" ? VoteMode::Any
                      : m == "uni" ? VoteMode::Uni
                                   : VoteMode::Ballot;
    } else if (inst.opcode == Opcode::BarSync && m == "warp") {
      inst.opcode = Opcode::BarWarpSync;
    } else if (inst.opcode == Opcode::BarSync && m == "arrive") {
      return "bar.arrive is not supported";
    } else if (isIgnoredModifier(m)) {
    } else {
      return "unsupported modifier '." + m + "' on " + base;
    }
  }
  if (!types.empty())
    inst.type = types[0];
  if (types.size() > 1)
    inst.sourceType = types[1];
  if (inst.opcode == Opcode::Bra && inst.rounding != Rounding::None)
    return "unsupported branch form '" + word + "'";
  if (inst.opcode == Opcode::Shfl && word.find(".sync") == std::string::npos)
    return "shfl without .sync (removed in sm_70) is not supported";
  if (inst.opcode == Opcode::Vote && word.find(".sync") == std::string::npos)
    return "vote without .sync (removed in sm_70) is not supported";
  return "";
}

unsigned parseSmVersion(const std::string &target) {
  // "sm_90", "sm_90a", "sm_80, debug"
  if (target.rfind("sm_", 0) != 0)
    return 0;
  return static_cast<unsigned>(std::strtoul(target.c_str() + 3, nullptr, 10));
}

// The packed fp8 conversions (PTX ISA, cvt, "Target ISA Notes" and "PTX ISA
// Notes"): sm_90 with PTX ISA 7.8, or sm_89 with 8.1. ptxas 13.0 refuses
// them elsewhere ("Feature 'cvt with .e4m3x2/.e5m2x2' requires .target sm_89
// or higher"), so a module that uses them on an older target is refused as
// a real JIT would refuse it, whatever GPU fdemu emulates. (LLVM's NVPTX
// backend emits cvt.rn{.relu}.f16x2.e4m3x2 for sm_89 with +ptx81:
// llvm/test/CodeGen/NVPTX/convert-sm89.ll.)
std::string checkTargetFeatures(const Instruction &inst,
                                const std::string &target,
                                unsigned ptxVersion) {
  unsigned smVersion = parseSmVersion(target);
  bool warpgroup = inst.opcode == Opcode::WarpgroupMma ||
                   inst.opcode == Opcode::WarpgroupFence ||
                   inst.opcode == Opcode::WarpgroupCommit ||
                   inst.opcode == Opcode::WarpgroupWait;
  if (warpgroup && smVersion != 0 &&
      (smVersion != 90 || target.rfind("sm_90a", 0) != 0))
    return "Instruction 'wgmma' requires .target sm_90a (the module's is " +
           target.substr(0, target.find(',')) + ")";
  if (warpgroup && ptxVersion != 0 && ptxVersion < 80)
    return "Instruction 'wgmma' requires PTX ISA .version 8.0 or later";
  bool cluster = inst.opcode == Opcode::ClusterArrive ||
                 inst.opcode == Opcode::ClusterWait ||
                 inst.opcode == Opcode::Mapa ||
                 inst.space == StateSpace::SharedCluster;
  if (cluster) {
    if (smVersion != 0 && smVersion < 90)
      return "Feature 'thread block clusters' requires .target sm_90 or "
             "higher (the module's is sm_" +
             std::to_string(smVersion) + ")";
    if (ptxVersion != 0 && ptxVersion < 78)
      return "Feature 'thread block clusters' requires PTX ISA .version 7.8 "
             "or later";
    return "";
  }
  if (inst.opcode == Opcode::GridDependencyWait ||
      inst.opcode == Opcode::LaunchDependents) {
    if (smVersion != 0 && smVersion < 90)
      return "Feature 'griddepcontrol' requires .target sm_90 or higher (the "
             "module's is sm_" +
             std::to_string(smVersion) + ")";
    if (ptxVersion != 0 && ptxVersion < 78)
      return "Feature 'griddepcontrol' requires PTX ISA .version 7.8 or later";
    return "";
  }
  bool float8 =
      inst.opcode == Opcode::Cvt &&
      (inst.type == Type::E4M3x2 || inst.type == Type::E5M2x2 ||
       inst.sourceType == Type::E4M3x2 || inst.sourceType == Type::E5M2x2);
  if (!float8 || smVersion == 0)
    return "";
  const std::string feature = "Feature 'cvt with .e4m3x2/.e5m2x2";
  if (smVersion < 89)
    return feature + "' requires .target sm_89 or higher (the module's is sm_" +
           std::to_string(smVersion) + ")";
  if (ptxVersion == 0)
    return "";
  if (smVersion < 90 && ptxVersion < 81)
    return feature + " on sm_89' requires PTX ISA .version 8.1 or later";
  if (ptxVersion < 78)
    return feature + "' requires PTX ISA .version 7.8 or later";
  return "";
}

bool writesFirstOperand(Opcode opcode) {
  switch (opcode) {
  case Opcode::St:
  case Opcode::Red:
  case Opcode::Bra:
  case Opcode::Ret:
  case Opcode::Exit:
  case Opcode::Trap:
  case Opcode::BarSync:
  case Opcode::BarWarpSync:
  case Opcode::Membar:
  case Opcode::Nop:
  case Opcode::CpAsync:
  case Opcode::CpAsyncCommit:
  case Opcode::CpAsyncWait:
  case Opcode::CpAsyncWaitAll:
  case Opcode::GridDependencyWait:
  case Opcode::LaunchDependents:
  case Opcode::ClusterArrive:
  case Opcode::ClusterWait:
  // wgmma.mma_async's destinations are its accumulators, not an operand.
  case Opcode::WarpgroupMma:
  case Opcode::WarpgroupFence:
  case Opcode::WarpgroupCommit:
  case Opcode::WarpgroupWait:
    return false;
  default:
    return true;
  }
}

InstructionClass classify(const Instruction &inst) {
  switch (inst.opcode) {
  case Opcode::Add:
  case Opcode::Sub:
  case Opcode::Mul:
  case Opcode::Mad:
  case Opcode::Fma:
  case Opcode::Neg:
  case Opcode::Abs:
    return isFloat(inst.type) ? InstructionClass::FloatArithmetic
                              : InstructionClass::IntegerOther;
  case Opcode::Div:
  case Opcode::Rcp:
  case Opcode::Sqrt:
  case Opcode::Rsqrt:
  case Opcode::Ex2:
  case Opcode::Lg2:
  case Opcode::Sin:
  case Opcode::Cos:
  case Opcode::Tanh:
    return isFloat(inst.type) ? InstructionClass::SpecialFunction
                              : InstructionClass::IntegerOther;
  case Opcode::Cvt:
    return isFloat(inst.type) || isFloat(inst.sourceType)
               ? InstructionClass::Conversion
               : InstructionClass::IntegerOther;
  case Opcode::Shfl:
    return InstructionClass::Shuffle;
  // A .shared::cluster access counts as a shared one (its latency and its
  // bytes over the SM-to-SM network are the model's own: LatencyModel.cpp,
  // WorkCounts::distributedSharedSectors).
  case Opcode::Ld:
    return inst.space == StateSpace::Shared ||
                   inst.space == StateSpace::SharedCluster
               ? InstructionClass::SharedLoad
           : inst.space == StateSpace::Param ? InstructionClass::IntegerOther
                                             : InstructionClass::GlobalLoad;
  case Opcode::St:
  case Opcode::Atom:
  case Opcode::Red:
    return inst.space == StateSpace::Shared ||
                   inst.space == StateSpace::SharedCluster
               ? InstructionClass::SharedStore
               : InstructionClass::GlobalStore;
  case Opcode::BarSync:
  case Opcode::BarWarpSync:
  case Opcode::Membar:
    return InstructionClass::Barrier;
  case Opcode::Bra:
  case Opcode::Ret:
  case Opcode::Exit:
  case Opcode::Trap:
    return InstructionClass::Control;
  case Opcode::Mma:
  case Opcode::WarpgroupMma:
    return InstructionClass::TensorCore;
  case Opcode::Ldmatrix:
    return InstructionClass::SharedLoad;
  // A copy is a global load whose result lands in shared memory; committing
  // and waiting are the dependency barriers (SASS LDGDEPBAR, DEPBAR).
  case Opcode::CpAsync:
    return InstructionClass::GlobalLoad;
  case Opcode::CpAsyncCommit:
  case Opcode::CpAsyncWait:
  case Opcode::CpAsyncWaitAll:
  case Opcode::WarpgroupFence:
  case Opcode::WarpgroupCommit:
  case Opcode::WarpgroupWait:
    return InstructionClass::Barrier;
  // Grid dependency control waits on (or releases) other grids.
  case Opcode::GridDependencyWait:
  case Opcode::LaunchDependents:
  case Opcode::ClusterArrive:
  case Opcode::ClusterWait:
    return InstructionClass::Barrier;
  default:
    return InstructionClass::IntegerOther;
  }
}

} // namespace flashdecode::emu
