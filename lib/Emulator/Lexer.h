//===- Lexer.h - PTX text into tokens with line numbers ---------*- C++ -*-===//

#ifndef FD_EMULATOR_LEXER_H
#define FD_EMULATOR_LEXER_H

#include <cstdint>
#include <string>
#include <vector>

namespace flashdecode::emu {

/// A word (identifier, directive, opcode with its modifiers, register,
/// number, label) or one punctuation character. Comments are dropped;
/// string literals (only in `.pragma`) are one word, quotes kept.
struct Token {
  std::string text;
  uint32_t line = 0;
  bool isPunctuation = false;

  bool is(char c) const {
    return isPunctuation && text.size() == 1 && text[0] == c;
  }
};

std::vector<Token> tokenize(const std::string &ptx);

} // namespace flashdecode::emu

#endif // FD_EMULATOR_LEXER_H
