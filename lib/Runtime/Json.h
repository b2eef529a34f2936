//===- Json.h - A small JSON reader for the manifest ------------*- C++ -*-===//
//
// The runtime reads manifest.json without LLVM: this is the subset of JSON
// the compiler writes (objects, arrays, strings with escapes, numbers,
// booleans, null). Private to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef FD_LIB_RUNTIME_JSON_H
#define FD_LIB_RUNTIME_JSON_H

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace flashdecode::rt::json {

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0.0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  /// The member `key` of an object, or nullptr.
  const Value *find(const std::string &key) const;
};

/// Parses `text`; throws std::runtime_error naming the offset of the first
/// error.
Value parse(const std::string &text);

} // namespace flashdecode::rt::json

#endif // FD_LIB_RUNTIME_JSON_H
