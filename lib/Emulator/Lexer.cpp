//===- Lexer.cpp - PTX text into tokens with line numbers -----------------===//

#include "Lexer.h"

#include <cctype>

namespace flashdecode::emu {

static bool isWordCharacter(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
         c == '%' || c == '$';
}

std::vector<Token> tokenize(const std::string &ptx) {
  std::vector<Token> tokens;
  uint32_t line = 1;
  size_t i = 0, n = ptx.size();
  while (i < n) {
    char c = ptx[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c)) || c == '\0') {
      ++i;
    } else if (c == '/' && i + 1 < n && ptx[i + 1] == '/') {
      while (i < n && ptx[i] != '\n')
        ++i;
    } else if (c == '/' && i + 1 < n && ptx[i + 1] == '*') {
      i += 2;
      while (i + 1 < n && !(ptx[i] == '*' && ptx[i + 1] == '/')) {
        if (ptx[i] == '\n')
          ++line;
        ++i;
      }
      i += 2;
    } else if (c == '"') {
      size_t start = i++;
      while (i < n && ptx[i] != '"' && ptx[i] != '\n')
        ++i;
      ++i;
      tokens.push_back({ptx.substr(start, i - start), line, false});
    } else if (isWordCharacter(c)) {
      size_t start = i;
      // A label definition `name:` ends at the colon; modifiers such as
      // `L2::evict_last` keep their double colons.
      while (i < n && (isWordCharacter(ptx[i]) ||
                       (ptx[i] == ':' && i + 1 < n && ptx[i + 1] == ':')))
        i += ptx[i] == ':' ? 2 : 1;
      tokens.push_back({ptx.substr(start, i - start), line, false});
    } else {
      tokens.push_back({std::string(1, c), line, true});
      ++i;
    }
  }
  return tokens;
}

} // namespace flashdecode::emu
