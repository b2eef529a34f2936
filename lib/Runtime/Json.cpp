//===- Json.cpp - A small JSON reader for the manifest --------------------===//

#include "Json.h"

#include <cstdlib>
#include <stdexcept>

namespace flashdecode::rt::json {

const Value *Value::find(const std::string &key) const {
  auto found = object.find(key);
  return found == object.end() ? nullptr : &found->second;
}

namespace {

class Parser {
public:
  explicit Parser(const std::string &text) : text(text) {}

  Value parseDocument() {
    Value value = parseValue();
    skipSpace();
    if (position != text.size())
      fail("unexpected text after the value");
    return value;
  }

private:
  [[noreturn]] void fail(const std::string &message) {
    throw std::runtime_error("invalid JSON at offset " +
                             std::to_string(position) + ": " + message);
  }
  void skipSpace() {
    while (position < text.size() &&
           (text[position] == ' ' || text[position] == '\n' ||
            text[position] == '\r' || text[position] == '\t'))
      ++position;
  }
  bool consume(char expected) {
    skipSpace();
    if (position < text.size() && text[position] == expected) {
      ++position;
      return true;
    }
    return false;
  }
  void expect(char expected) {
    if (!consume(expected))
      fail(std::string("expected '") + expected + "'");
  }
  bool consumeWord(const char *word) {
    size_t length = std::char_traits<char>::length(word);
    if (text.compare(position, length, word) != 0)
      return false;
    position += length;
    return true;
  }

  Value parseValue() {
    skipSpace();
    if (position == text.size())
      fail("unexpected end");
    Value value;
    char next = text[position];
    if (next == '{') {
      value.kind = Value::Kind::Object;
      ++position;
      if (consume('}'))
        return value;
      do {
        skipSpace();
        std::string key = parseString();
        expect(':');
        value.object[key] = parseValue();
      } while (consume(','));
      expect('}');
    } else if (next == '[') {
      value.kind = Value::Kind::Array;
      ++position;
      if (consume(']'))
        return value;
      do
        value.array.push_back(parseValue());
      while (consume(','));
      expect(']');
    } else if (next == '"') {
      value.kind = Value::Kind::String;
      value.string = parseString();
    } else if (consumeWord("true") || consumeWord("false")) {
      value.kind = Value::Kind::Bool;
      value.boolean = text[position - 1] == 'e' && text[position - 2] == 'u';
    } else if (consumeWord("null")) {
      value.kind = Value::Kind::Null;
    } else {
      const char *start = text.c_str() + position;
      char *end = nullptr;
      value.number = std::strtod(start, &end);
      if (end == start)
        fail("expected a value");
      value.kind = Value::Kind::Number;
      position += end - start;
    }
    return value;
  }

  std::string parseString() {
    if (position >= text.size() || text[position] != '"')
      fail("expected a string");
    ++position;
    std::string result;
    while (true) {
      if (position >= text.size())
        fail("unterminated string");
      char c = text[position++];
      if (c == '"')
        return result;
      if (c != '\\') {
        result += c;
        continue;
      }
      if (position >= text.size())
        fail("unterminated escape");
      char escaped = text[position++];
      switch (escaped) {
      case 'n':
        result += '\n';
        break;
      case 't':
        result += '\t';
        break;
      case 'r':
        result += '\r';
        break;
      case 'b':
        result += '\b';
        break;
      case 'f':
        result += '\f';
        break;
      case 'u': {
        if (position + 4 > text.size())
          fail("short \\u escape");
        unsigned code = std::stoul(text.substr(position, 4), nullptr, 16);
        position += 4;
        // The manifest is ASCII; anything else is kept as UTF-8.
        if (code < 0x80) {
          result += static_cast<char>(code);
        } else if (code < 0x800) {
          result += static_cast<char>(0xC0 | (code >> 6));
          result += static_cast<char>(0x80 | (code & 0x3F));
        } else {
          result += static_cast<char>(0xE0 | (code >> 12));
          result += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          result += static_cast<char>(0x80 | (code & 0x3F));
        }
        break;
      }
      default:
        result += escaped; // \" \\ \/
      }
    }
  }

  const std::string &text;
  size_t position = 0;
};

} // namespace

Value parse(const std::string &text) { return Parser(text).parseDocument(); }

} // namespace flashdecode::rt::json
