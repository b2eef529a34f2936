//===- ScheduleText.cpp - A schedule as #fd.schedule spells it ------------===//
//
// A ScheduleChoice's fields by name, and its text, for what names one
// outside the IR: fd-compile --schedule, compile(schedule=), the JIT's cache
// key and the manifest.
//
//===----------------------------------------------------------------------===//

#include "fd/Planning/KernelPlan.h"

#include <cctype>
#include <charconv>
#include <functional>
#include <sstream>
#include <utility>

namespace flashdecode {

namespace {

/// The integer fields in #fd.schedule's order, after `form`.
const std::pair<const char *, int64_t ScheduleChoice::*> kIntegerFields[] = {
    {"rows_per_tile", &ScheduleChoice::rowsPerTile},
    {"row_tiles", &ScheduleChoice::rowTiles},
    {"threads", &ScheduleChoice::threads},
    {"min_blocks_per_sm", &ScheduleChoice::minBlocksPerSM},
    {"held_query_steps", &ScheduleChoice::heldQuerySteps},
    {"stages", &ScheduleChoice::keyValueStages}};
/// Those a text must give; the others default to 0.
constexpr int kRequiredIntegerFields = 3;
/// The field after them, defaulting to 1 (and spelled only when not 1).
constexpr const char *kClusterField = "cluster_ctas";

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text[0])))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

} // namespace

void forEachScheduleField(
    const ScheduleChoice &choice,
    const std::function<void(const char *name, int64_t value)> &visit) {
  for (auto [name, field] : kIntegerFields)
    visit(name, choice.*field);
  if (choice.clusterCtas != 1)
    visit(kClusterField, choice.clusterCtas);
}

std::string formatScheduleChoice(const ScheduleChoice &choice) {
  std::ostringstream os;
  os << "form = " << getKernelFormName(choice.form);
  forEachScheduleField(choice, [&](const char *name, int64_t value) {
    os << ", " << name << " = " << value;
  });
  return os.str();
}

std::optional<ScheduleChoice> parseScheduleChoice(std::string_view text,
                                                  std::string &error) {
  text = trim(text);
  constexpr std::string_view kPrefix = "#fd.schedule<";
  if (text.substr(0, kPrefix.size()) == kPrefix) {
    if (text.back() != '>') {
      error = "a schedule that opens with '#fd.schedule<' must close with '>'";
      return std::nullopt;
    }
    text = text.substr(kPrefix.size(), text.size() - kPrefix.size() - 1);
  }
  ScheduleChoice choice;
  std::string fields = "form";
  for (auto [name, field] : kIntegerFields)
    fields += std::string(", ") + name;
  fields += std::string(", ") + kClusterField;
  constexpr size_t kClusterIndex = 1 + std::size(kIntegerFields);
  bool seen[kClusterIndex + 1] = {};
  if (trim(text).empty()) {
    error = "the schedule is empty: it needs form, rows_per_tile, row_tiles "
            "and threads";
    return std::nullopt;
  }
  for (bool more = true; more;) {
    size_t comma = text.find(',');
    std::string_view pair = trim(text.substr(0, comma));
    more = comma != std::string_view::npos;
    if (more)
      text = text.substr(comma + 1);
    if (pair.empty()) {
      error = "the schedule has an empty field (a comma too many?)";
      return std::nullopt;
    }
    size_t equals = pair.find('=');
    std::string_view name = trim(pair.substr(0, equals));
    std::string_view value =
        equals == std::string_view::npos ? "" : trim(pair.substr(equals + 1));
    if (equals == std::string_view::npos || value.empty()) {
      error = "'" + std::string(pair) + "' is not 'name = value'";
      return std::nullopt;
    }
    int index = -1;
    if (name == "form")
      index = 0;
    for (size_t i = 0; i < std::size(kIntegerFields); ++i)
      if (name == kIntegerFields[i].first)
        index = 1 + i;
    if (name == kClusterField)
      index = kClusterIndex;
    if (index < 0) {
      error = "unknown schedule field '" + std::string(name) + "': expected " +
              std::string(fields);
      return std::nullopt;
    }
    if (seen[index]) {
      error = "schedule field '" + std::string(name) + "' is given twice";
      return std::nullopt;
    }
    seen[index] = true;
    if (index == 0) {
      std::optional<KernelForm> form = findKernelForm(value);
      if (!form) {
        error = "form = " + std::string(value) +
                " is not a kernel form: expected cuda_cores or tensor_cores";
        return std::nullopt;
      }
      choice.form = *form;
      continue;
    }
    int64_t number = 0;
    auto [end, status] =
        std::from_chars(value.data(), value.data() + value.size(), number);
    if (status != std::errc() || end != value.data() + value.size()) {
      error = std::string(name) + " = " + std::string(value) +
              (status == std::errc::result_out_of_range ? " is out of range"
                                                        : " is not an integer");
      return std::nullopt;
    }
    if (index == static_cast<int>(kClusterIndex))
      choice.clusterCtas = number;
    else
      choice.*kIntegerFields[index - 1].second = number;
  }
  for (int index = 0; index <= kRequiredIntegerFields; ++index)
    if (!seen[index]) {
      error = std::string("the schedule has no ") +
              (index == 0 ? "form" : kIntegerFields[index - 1].first) +
              ": it needs form, rows_per_tile, row_tiles and threads "
              "(min_blocks_per_sm, held_query_steps and stages default to 0)";
      return std::nullopt;
    }
  return choice;
}

} // namespace flashdecode
