// The command-line pieces that ingrid-node (cluster/) and ingrid-cli (client/) share: CLI11
// validators that name what an option takes, and the reading of a secret file. Here because
// both programs may use ingrid::wire; header-only, and only the two programs include it (they
// link CLI11; the library does not).
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

namespace ingrid::cli {

// A whole number in [min, max] in decimal digits: "3x", "", "0x10" and numbers past the range
// (even past int64) are refused, naming the range. The text is rewritten in canonical form, so
// that CLI11's own conversion (which would read a leading 0 as octal) sees the number checked.
inline CLI::Validator wholeIn(long long min, long long max) {
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        long long v = 0;
        const char* end = text.data() + text.size();
        const auto [at, ec] = std::from_chars(text.data(), end, v, 10);
        if (text.empty() || at != end ||
            (ec != std::errc() && ec != std::errc::result_out_of_range)) {
          return "'" + text + "' is not a whole number in " + range;
        }
        if (ec == std::errc::result_out_of_range || v < min || v > max) {
          return text + " is not in " + range;
        }
        text = std::to_string(v);
        return {};
      },
      range);
}

// One of `names`, exactly.
inline CLI::Validator oneOf(std::vector<std::string> names) {
  std::string list, choices;
  for (const auto& n : names) {
    list += (list.empty() ? "" : ", ") + n;
    choices += (choices.empty() ? "" : "|") + n;
  }
  return CLI::Validator(
      [names, list](std::string& text) -> std::string {
        if (std::find(names.begin(), names.end(), text) != names.end()) return {};
        return "'" + text + "' is not one of " + list;
      },
      choices);
}

// The secret in the file at `path` (one line; a trailing newline is dropped), or "" if it cannot
// be read.
inline std::string readSecretFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (!in.good() && !in.eof()) secret.clear();
  return secret;
}

// For add_option_function<std::string>(option, ...): reads the secret in the file it is given
// into `out`, and refuses (naming `option`, as a bad value is refused) a file that cannot be
// read or is empty.
inline std::function<void(const std::string&)> secretFileInto(std::string option,
                                                              std::string& out) {
  return [option = std::move(option), &out](const std::string& path) {
    out = readSecretFile(path);
    if (out.empty()) throw CLI::ValidationError(option, path + ": cannot read it, or it is empty");
  };
}

}  // namespace ingrid::cli
