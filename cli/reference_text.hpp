// What an installed tpuctl says about itself without its README: the exit statuses and the json
// fields of each kind of record, printed by `tpuctl --help`, each command's --help and the man
// pages (cli/man_page.cpp). README.md "Exit status" and "Output fields" say the same; a test
// keeps them in step.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tpuctl::cli {

struct ExitStatusRow {
  int code;
  const char* meaning;
};
// Every exit status tpuctl promises, in order.
const std::vector<ExitStatusRow>& exit_status_rows();
// "Exit status:\n  0    success\n ..." for --help.
std::string exit_status_text();

struct RecordFields {
  const char* kind;   // "queued resource"
  const char* fields; // "id, pool, uid, state, ..." (nested fields in parentheses)
};
// The json fields of each kind of record tpuctl prints.
const std::vector<RecordFields>& record_fields();

// Appends "Fields of each <kind>: ..."
// to the --help footer of every command that prints records (qr list, tpu-vm describe, ssh
// --output jsonl, ...). Called once the whole command tree is built.
void add_field_footers(CLI::App& root);

} // namespace tpuctl::cli
