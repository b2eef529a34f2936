//===- Parser.cpp - PTX module text into the decoded form -----------------===//
//
// Covers what LLVM's NVPTX backend and `nvcc -ptx` emit for kernels without
// device-function calls: module directives, .entry with parameters, .reg,
// .shared (static and `.extern` dynamic), .local, labels, guarded
// instructions with register, immediate, address, vector and symbol
// operands. Anything else is a ParseError naming the PTX line.
//
//===----------------------------------------------------------------------===//

#include "Lexer.h"
#include "Opcodes.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace flashdecode::emu {
namespace {

struct Symbol {
  StateSpace space;
  uint64_t address;
};

uint32_t alignTo(uint32_t value, uint32_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

const std::unordered_map<std::string, uint32_t> &specialRegisters() {
  static const std::unordered_map<std::string, uint32_t> names = {
      {"%tid.x", TidX},
      {"%tid.y", TidY},
      {"%tid.z", TidZ},
      {"%ntid.x", NtidX},
      {"%ntid.y", NtidY},
      {"%ntid.z", NtidZ},
      {"%ctaid.x", CtaidX},
      {"%ctaid.y", CtaidY},
      {"%ctaid.z", CtaidZ},
      {"%nctaid.x", NctaidX},
      {"%nctaid.y", NctaidY},
      {"%nctaid.z", NctaidZ},
      {"%laneid", LaneId},
      {"%warpid", WarpId},
      {"%nwarpid", NWarpId},
      {"%lanemask_eq", LanemaskEq},
      {"%lanemask_lt", LanemaskLt},
      {"%lanemask_le", LanemaskLe},
      {"%lanemask_gt", LanemaskGt},
      {"%lanemask_ge", LanemaskGe},
      {"%smid", SmId},
      {"%dynamic_smem_size", DynamicSmemSize},
      {"%clock", Clock},
      {"%clock64", Clock64},
      {"%cluster_ctarank", ClusterCtaRank},
      {"%cluster_nctarank", ClusterNCtaRank},
      {"%cluster_ctaid.x", ClusterCtaIdX},
      {"%cluster_ctaid.y", ClusterCtaIdY},
      {"%cluster_ctaid.z", ClusterCtaIdZ},
      {"%cluster_nctaid.x", ClusterNCtaIdX},
      {"%cluster_nctaid.y", ClusterNCtaIdY},
      {"%cluster_nctaid.z", ClusterNCtaIdZ},
      {"%clusterid.x", ClusterIdX},
      {"%clusterid.y", ClusterIdY},
      {"%clusterid.z", ClusterIdZ},
      {"%nclusterid.x", NClusterIdX},
      {"%nclusterid.y", NClusterIdY},
      {"%nclusterid.z", NClusterIdZ},
      {"%is_explicit_cluster", IsExplicitCluster}};
  return names;
}

class Parser {
public:
  explicit Parser(const std::string &ptx) : tokens(tokenize(ptx)) {}

  Module parse() {
    Module module;
    while (!atEnd()) {
      const Token &token = peek();
      if (token.text == ".version") {
        next();
        module.ptxVersion = parseVersion(next());
        ptxVersion = module.ptxVersion;
      } else if (token.text == ".address_size") {
        next();
        next();
      } else if (token.text == ".target") {
        next();
        module.target = next().text;
        target = module.target;
        while (!atEnd() && peek().is(',')) {
          next();
          next();
        }
      } else if (token.text == ".file" || token.text == ".loc") {
        skipLine();
      } else if (token.text == ".section") {
        skipBalancedBraces();
      } else if (token.text == ".visible" || token.text == ".weak") {
        next();
      } else if (token.text == ".entry") {
        next();
        std::shared_ptr<Kernel> kernel = parseEntry();
        if (kernel)
          module.kernels[kernel->name] = std::move(kernel);
      } else if (token.text == ".extern" || token.text == ".shared") {
        parseModuleVariable();
      } else if (token.text == ".func") {
        fail(token, "device functions (.func) are not supported; kernels "
                    "must be fully inlined");
      } else if (token.text == ".global" || token.text == ".const") {
        fail(token,
             "module-scope " + token.text + " variables are not supported");
      } else {
        fail(token, "unexpected '" + token.text + "' at module scope");
      }
    }
    return module;
  }

private:
  /// One extent of .reqnctapercluster or .maxclusterrank: 1 or more.
  uint32_t parseClusterExtent(const std::string &directive) {
    const Token &token = next();
    unsigned long value = 0;
    if (!token.text.empty() && token.text.size() <= 5 &&
        token.text.find_first_not_of("0123456789") == std::string::npos)
      value = std::stoul(token.text);
    if (value == 0 || value > 0xFFFF)
      fail(token, directive + " takes whole numbers of at least 1, not '" +
                      token.text + "'");
    return static_cast<uint32_t>(value);
  }

  [[noreturn]] void fail(const Token &token, const std::string &message) {
    throw ParseError{"PTX line " + std::to_string(token.line) + ": " + message};
  }
  /// "8.1" as 81.
  unsigned parseVersion(const Token &token) {
    const std::string &text = token.text;
    size_t dot = text.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 2 != text.size() ||
        !std::isdigit(static_cast<unsigned char>(text[0])) ||
        !std::isdigit(static_cast<unsigned char>(text[dot + 1])))
      fail(token, "malformed .version '" + text + "'");
    return static_cast<unsigned>(std::strtoul(text.c_str(), nullptr, 10) * 10 +
                                 (text[dot + 1] - '0'));
  }
  bool atEnd() const { return position >= tokens.size(); }
  const Token &peek() const {
    static const Token end{"<end of PTX>", 0, true};
    return atEnd() ? (tokens.empty() ? end : tokens.back()) : tokens[position];
  }
  const Token &next() {
    if (atEnd())
      fail(peek(), "unexpected end of PTX");
    return tokens[position++];
  }
  void expect(char c) {
    const Token &token = next();
    if (!token.is(c))
      fail(token,
           std::string("expected '") + c + "', found '" + token.text + "'");
  }
  void skipLine() {
    uint32_t line = peek().line;
    while (!atEnd() && peek().line == line)
      ++position;
  }
  void skipBalancedBraces() {
    while (!atEnd() && !peek().is('{'))
      ++position;
    int depth = 0;
    do {
      const Token &token = next();
      depth += token.is('{') ? 1 : token.is('}') ? -1 : 0;
    } while (depth > 0);
  }

  /// `.align N .type name[N]` (after the state space); returns the name,
  /// the size (0 for `[]`) and the alignment.
  void parseVariable(std::string &name, uint32_t &size, uint32_t &alignment) {
    alignment = 1;
    unsigned elementSize = 1;
    while (!atEnd() && peek().text[0] == '.') {
      std::string directive = next().text;
      if (directive == ".align")
        alignment = std::stoul(next().text);
      else if (auto type = parseTypeName(directive.substr(1)))
        elementSize = getTypeSize(*type);
      else if (directive != ".ptr" && directive != ".global" &&
               directive != ".shared" && directive != ".const" &&
               directive != ".local")
        fail(tokens[position - 1],
             "unsupported variable directive '" + directive + "'");
    }
    name = next().text;
    size = elementSize;
    if (peek().is('[')) {
      next();
      if (peek().is(']')) {
        size = 0;
      } else {
        size = elementSize * std::stoul(next().text);
      }
      expect(']');
    }
    alignment = std::max(alignment, elementSize);
    if (peek().is('='))
      fail(peek(), "initialized variables are not supported");
  }

  void parseModuleVariable() {
    bool isExtern = peek().text == ".extern";
    if (isExtern)
      next();
    const Token &space = next();
    if (space.text != ".shared")
      fail(space,
           "module-scope " + space.text + " variables are not supported");
    std::string name;
    uint32_t size, alignment;
    parseVariable(name, size, alignment);
    expect(';');
    if (isExtern || size == 0) {
      dynamicShared.push_back(name);
      dynamicAlignment = std::max(dynamicAlignment, alignment);
    } else {
      moduleShared.push_back({name, size, alignment});
    }
  }

  bool isRegisterName(const std::string &name) const {
    return name[0] == '%' || plainRegisters.count(name);
  }

  /// Declared with .reg .pred, alone or as `name<N>`.
  bool isPredicate(const std::string &name) const {
    size_t end = name.find_last_not_of("0123456789") + 1;
    return predicateRegisters.count(name) ||
           predicateRegisters.count(name.substr(0, end));
  }

  uint32_t getRegister(const std::string &name, Kernel &kernel) {
    auto special = specialRegisters().find(name);
    if (special != specialRegisters().end())
      return special->second;
    auto [entry, inserted] = registers.try_emplace(name, kernel.numRegisters);
    if (inserted)
      ++kernel.numRegisters;
    return entry->second;
  }

  std::shared_ptr<Kernel> parseEntry() {
    auto kernel = std::make_shared<Kernel>();
    kernel->name = next().text;
    registers.clear();
    plainRegisters.clear();
    predicateRegisters.clear();
    symbols.clear();
    labels.clear();
    pendingBranches.clear();
    expect('(');
    while (!peek().is(')')) {
      if (peek().is(','))
        next();
      if (next().text != ".param")
        fail(tokens[position - 1], "expected .param in the parameter list");
      std::string name;
      uint32_t size, alignment;
      parseVariable(name, size, alignment);
      kernel->parameterBytes = alignTo(kernel->parameterBytes, alignment);
      kernel->parameters.push_back({name, kernel->parameterBytes, size});
      symbols[name] = {StateSpace::Param, kernel->parameterBytes};
      kernel->parameterBytes += size;
    }
    next();
    // Performance directives: .maxntid, .reqntid, .minnctapersm, ...
    while (!atEnd() && !peek().is('{') && !peek().is(';')) {
      std::string directive = next().text;
      if (directive == ".maxntid" || directive == ".reqntid") {
        uint32_t threads = 1;
        do {
          if (peek().is(','))
            next();
          threads *= std::stoul(next().text);
        } while (peek().is(','));
        kernel->maxThreads = threads;
      } else if (directive == ".reqnctapercluster") {
        for (unsigned i = 0; i < 3; ++i)
          kernel->requiredCluster[i] = 1;
        for (unsigned i = 0; i < 3; ++i) {
          if (i && !peek().is(','))
            break;
          if (i)
            next();
          kernel->requiredCluster[i] = parseClusterExtent(directive);
        }
      } else if (directive == ".explicitcluster") {
        kernel->explicitCluster = true;
      } else if (directive == ".maxclusterrank") {
        kernel->maxClusterRank = parseClusterExtent(directive);
      } else if (directive == ".minnctapersm" || directive == ".maxnreg" ||
                 directive == ".maxnctapersm" || directive == ".noreturn" ||
                 directive == ".pragma") {
        while (!atEnd() &&
               (peek().is(',') ||
                std::isdigit(static_cast<unsigned char>(peek().text[0])) ||
                peek().text[0] == '"')) {
          next();
        }
        if (peek().is(';'))
          next();
      } else {
        fail(tokens[position - 1],
             "unsupported kernel directive '" + directive + "'");
      }
    }
    if (peek().is(';')) {
      next();
      return nullptr;
    }
    uint32_t shared = 0;
    for (const auto &variable : moduleShared) {
      shared = alignTo(shared, variable.alignment);
      symbols[variable.name] = {StateSpace::Shared, shared};
      shared += variable.size;
    }
    parseBody(*kernel, shared);
    kernel->staticSharedBytes = shared;
    kernel->dynamicSharedOffset = alignTo(shared, dynamicAlignment);
    for (const std::string &name : dynamicShared)
      symbols[name] = {StateSpace::Shared, kernel->dynamicSharedOffset};
    // Dynamic shared symbols may be used before they are placed: resolve
    // every pending address now that the static layout is known.
    for (auto &[index, operand, name] : pendingSymbols) {
      auto found = symbols.find(name);
      if (found == symbols.end())
        fail({name, kernel->code[index].line}, "unknown symbol '" + name + "'");
      kernel->code[index].operands[operand].value += found->second.address;
    }
    pendingSymbols.clear();
    for (auto &[index, label] : pendingBranches) {
      auto found = labels.find(label);
      if (found == labels.end())
        fail({label, kernel->code[index].line},
             "branch to unknown label '" + label + "'");
      kernel->code[index].operands[0].value = found->second;
    }
    return kernel;
  }

  void parseBody(Kernel &kernel, uint32_t &shared) {
    expect('{');
    int depth = 1;
    while (depth > 0) {
      const Token &token = peek();
      if (token.is('{')) {
        next();
        ++depth;
      } else if (token.is('}')) {
        next();
        --depth;
      } else if (token.text == ".reg") {
        // Names need no `%` (nvcc's inline asm declares `.reg .b32 c;`):
        // remember those, or their uses would read as symbols. Predicates
        // are remembered too (`%p<3>` remembers %p, the prefix of %p0).
        bool predicates = position + 1 < tokens.size() &&
                          tokens[position + 1].text == ".pred";
        for (const Token *name = &next(); !name->is(';'); name = &next()) {
          bool isName =
              !name->isPunctuation && name->text[0] != '.' &&
              !std::isdigit(static_cast<unsigned char>(name->text[0]));
          if (isName && name->text[0] != '%')
            plainRegisters.insert(name->text);
          if (isName && predicates)
            predicateRegisters.insert(name->text);
        }
      } else if (token.text == ".shared" || token.text == ".local") {
        bool isShared = next().text == ".shared";
        std::string name;
        uint32_t size, alignment;
        parseVariable(name, size, alignment);
        expect(';');
        uint32_t &offset = isShared ? shared : kernel.localBytes;
        offset = alignTo(offset, alignment);
        symbols[name] = {isShared ? StateSpace::Shared : StateSpace::Local,
                         offset};
        offset += size;
      } else if (token.text == ".loc" || token.text == ".file") {
        skipLine();
      } else if (token.text == ".pragma") {
        while (!next().is(';')) {
        }
      } else if (!token.isPunctuation && tokens.size() > position + 1 &&
                 tokens[position + 1].is(':')) {
        labels[token.text] = kernel.code.size();
        next();
        next();
      } else {
        parseInstruction(kernel);
      }
    }
  }

  void parseInstruction(Kernel &kernel) {
    Instruction inst;
    const Token &first = peek();
    inst.line = first.line;
    size_t start = position;
    if (first.is('@')) {
      next();
      if (peek().is('!')) {
        next();
        inst.guardNegated = true;
      }
      inst.guard = getRegister(next().text, kernel);
    }
    const Token &opcode = next();
    std::string error = decodeOpcode(opcode.text, inst);
    if (error.empty())
      error = checkTargetFeatures(inst, target, ptxVersion);
    if (!error.empty())
      fail(opcode, error + " (in '" + opcode.text + "')");
    std::vector<std::vector<Token>> operands;
    while (!peek().is(';')) {
      if (peek().is(',')) {
        next();
        continue;
      }
      std::vector<Token> operand;
      int depth = 0;
      while (!(depth == 0 && (peek().is(',') || peek().is(';')))) {
        const Token &token = next();
        depth += token.is('[') || token.is('{')   ? 1
                 : token.is(']') || token.is('}') ? -1
                                                  : 0;
        operand.push_back(token);
      }
      operands.push_back(std::move(operand));
    }
    next();
    // The instruction as written: a space after the opcode, after commas
    // and between words.
    size_t opcodeIndex = &opcode - tokens.data();
    for (size_t i = start; i + 1 < position; ++i) {
      bool space = i > start &&
                   (i == opcodeIndex + 1 || tokens[i - 1].is(',') ||
                    (!tokens[i].isPunctuation && !tokens[i - 1].isPunctuation));
      inst.text += (space ? " " : "") + tokens[i].text;
    }
    if (inst.opcode == Opcode::CpAsync && operands.size() > 3 &&
        isPredicate(operands[3][0].text))
      fail(opcode, "cp.async with an ignore-src predicate is not supported; "
                   "fdemu implements the src-size operand");
    size_t index = kernel.code.size();
    if (inst.opcode == Opcode::WarpgroupMma) {
      parseWarpgroupMmaOperands(operands, kernel, inst, index, opcode);
    } else {
      if (operands.size() > 5)
        fail(opcode, "too many operands");
      for (size_t i = 0; i < operands.size(); ++i)
        inst.operands[i] = parseOperand(operands[i], kernel, inst, index, i);
      inst.numOperands = operands.size();
    }
    if (inst.opcode == Opcode::Bra) {
      if (inst.numOperands != 1 || operands[0].size() != 1)
        fail(opcode, "bra takes one label");
      pendingBranches.emplace_back(index, operands[0][0].text);
      inst.operands[0] = Operand{};
      inst.operands[0].kind = Operand::Kind::Immediate;
    }
    inst.kind = classify(inst);
    kernel.code.push_back(std::move(inst));
  }

  /// wgmma.mma_async's d (N / 2 registers, into inst.accumulators), a, b,
  /// scale-d, then its immediates: imm-scale-a, imm-scale-b (1 or -1),
  /// imm-trans-a (only when a is a descriptor) and imm-trans-b (0 or 1).
  void
  parseWarpgroupMmaOperands(const std::vector<std::vector<Token>> &operands,
                            Kernel &kernel, Instruction &inst, size_t index,
                            const Token &opcode) {
    bool aInRegisters = operands.size() > 1 && operands[1][0].is('{');
    size_t expected = aInRegisters ? 7 : 8;
    if (operands.size() != expected || !operands[0][0].is('{'))
      fail(opcode, std::string("wgmma.mma_async with a ") +
                       (aInRegisters ? "register fragment" : "descriptor") +
                       " for a takes " + std::to_string(expected) +
                       " operands: d, a, b, scale-d, imm-scale-a, "
                       "imm-scale-b, " +
                       (aInRegisters ? "" : "imm-trans-a, ") + "imm-trans-b");
    for (size_t i = 1; i + 1 < operands[0].size(); ++i)
      if (!operands[0][i].is(','))
        inst.accumulators.push_back(getRegister(operands[0][i].text, kernel));
    inst.operands[0].kind = Operand::Kind::Vector;
    for (size_t i = 1; i < 4; ++i)
      inst.operands[i] = parseOperand(operands[i], kernel, inst, index, i);
    inst.numOperands = 4;
    // An immediate that must be `first` or `second`.
    auto immediate = [&](size_t i, const char *name, int first, int second) {
      const std::vector<Token> &tokens = operands[i];
      bool negative = tokens.size() == 2 && tokens[0].is('-');
      const Token &digits = tokens.back();
      int value = 0;
      bool valid = tokens.size() == (negative ? 2u : 1u) &&
                   std::isdigit(static_cast<unsigned char>(digits.text[0]));
      if (valid)
        value = static_cast<int>(parseNumber(digits, negative));
      if (!valid || (value != first && value != second))
        fail(tokens[0], std::string("wgmma.mma_async ") + name + " must be " +
                            std::to_string(first) + " or " +
                            std::to_string(second));
      return value;
    };
    inst.negateA = immediate(4, "imm-scale-a", 1, -1) < 0;
    inst.negateB = immediate(5, "imm-scale-b", 1, -1) < 0;
    if (!aInRegisters)
      inst.transposeA = immediate(6, "imm-trans-a", 0, 1);
    inst.transposeB = immediate(expected - 1, "imm-trans-b", 0, 1);
  }

  uint64_t parseNumber(const Token &token, bool negative) {
    const std::string &text = token.text;
    uint64_t value = 0;
    if (text.size() == 10 && (text[1] == 'f' || text[1] == 'F') &&
        text[0] == '0') {
      value = std::stoull(text.substr(2), nullptr, 16);
    } else if (text.size() == 18 && (text[1] == 'd' || text[1] == 'D') &&
               text[0] == '0') {
      value = std::stoull(text.substr(2), nullptr, 16);
    } else {
      try {
        size_t used = 0;
        std::string digits = text;
        if (!digits.empty() && (digits.back() == 'U' || digits.back() == 'u'))
          digits.pop_back();
        value = std::stoull(digits, &used, 0);
        if (used != digits.size())
          fail(token, "malformed number '" + text + "'");
      } catch (const std::logic_error &) {
        fail(token, "malformed number '" + text + "'");
      }
    }
    return negative ? ~value + 1 : value;
  }

  Operand parseOperand(const std::vector<Token> &tokens, Kernel &kernel,
                       Instruction &inst, size_t index, size_t which) {
    Operand operand;
    const Token &first = tokens[0];
    if (first.is('[')) {
      operand.kind = Operand::Kind::Address;
      bool negative = false;
      for (size_t i = 1; i + 1 < tokens.size(); ++i) {
        const Token &token = tokens[i];
        if (token.is('+')) {
          negative = false;
        } else if (token.is('-')) {
          negative = !negative;
        } else if (isRegisterName(token.text)) {
          operand.registers[0] = getRegister(token.text, kernel);
        } else if (std::isdigit(static_cast<unsigned char>(token.text[0]))) {
          operand.value += parseNumber(token, negative);
          negative = false;
        } else {
          if (inst.opcode == Opcode::Ld || inst.opcode == Opcode::St ||
              inst.opcode == Opcode::Ldmatrix) {
            auto found = symbols.find(token.text);
            if (found != symbols.end() && inst.space == StateSpace::Generic)
              inst.space = found->second.space;
          }
          pendingSymbols.emplace_back(index, which, token.text);
        }
      }
      return operand;
    }
    if (first.is('{')) {
      operand.kind = Operand::Kind::Vector;
      // Immediate elements (nvcc's `mov.b32 %f, {0, %rs}`) have no
      // register; their bits go to `value` at the element's position.
      std::vector<std::pair<uint8_t, uint64_t>> immediates;
      bool negative = false;
      for (size_t i = 1; i + 1 < tokens.size(); ++i) {
        if (tokens[i].is(','))
          continue;
        if (tokens[i].is('-')) {
          negative = true;
          continue;
        }
        if (operand.count == 4)
          fail(first, "vector operands have at most 4 elements");
        uint32_t reg = kNoRegister;
        if (std::isdigit(static_cast<unsigned char>(tokens[i].text[0])))
          immediates.emplace_back(operand.count,
                                  parseNumber(tokens[i], negative));
        else if (tokens[i].text != "_")
          reg = getRegister(tokens[i].text, kernel);
        operand.registers[operand.count++] = reg;
        negative = false;
      }
      unsigned elementBits =
          getTypeSize(inst.type) * 8 /
          (inst.opcode == Opcode::Mov ? std::max<unsigned>(operand.count, 1)
                                      : 1);
      for (auto [element, bits] : immediates) {
        if (elementBits < 64)
          bits &= (uint64_t(1) << elementBits) - 1;
        operand.elementValues[element] = bits;
      }
      return operand;
    }
    size_t i = 0;
    if (first.is('!')) {
      operand.negated = true;
      ++i;
    }
    bool negative = false;
    if (tokens[i].is('-')) {
      negative = true;
      ++i;
    }
    if (i >= tokens.size())
      fail(first, "missing operand");
    const Token &token = tokens[i];
    if (isRegisterName(token.text)) {
      operand.kind = Operand::Kind::Register;
      operand.registers[0] = getRegister(token.text, kernel);
      if (i + 2 < tokens.size() && tokens[i + 1].is('|'))
        inst.secondDestination = getRegister(tokens[i + 2].text, kernel);
    } else if (token.text == "_") {
      operand.kind = Operand::Kind::Register;
      operand.registers[0] = kNoRegister;
    } else if (std::isdigit(static_cast<unsigned char>(token.text[0]))) {
      operand.kind = Operand::Kind::Immediate;
      operand.value = parseNumber(token, negative);
    } else {
      // A symbol: a variable's address in its state space, or a label.
      operand.kind = Operand::Kind::Immediate;
      if (inst.opcode != Opcode::Bra)
        pendingSymbols.emplace_back(index, which, token.text);
    }
    return operand;
  }

  struct Variable {
    std::string name;
    uint32_t size, alignment;
  };

  std::vector<Token> tokens;
  size_t position = 0;
  /// The module's .target and .version (0 until seen).
  std::string target;
  unsigned ptxVersion = 0;
  std::vector<Variable> moduleShared;
  std::vector<std::string> dynamicShared;
  uint32_t dynamicAlignment = 16;
  std::unordered_map<std::string, uint32_t> registers;
  std::unordered_set<std::string> plainRegisters, predicateRegisters;
  std::unordered_map<std::string, Symbol> symbols;
  std::unordered_map<std::string, uint32_t> labels;
  std::vector<std::pair<size_t, std::string>> pendingBranches;
  std::vector<std::tuple<size_t, size_t, std::string>> pendingSymbols;
};

} // namespace

Module parseModule(const std::string &ptx) { return Parser(ptx).parse(); }

} // namespace flashdecode::emu
