// gcloud's --worker grammar (parse_worker_selection). Input: two bytes for the slice's worker
// count (1 to 4096), then the flag's text. Property: the selection is ascending, without
// duplicates, within 0..workers-1, and "all" selects every worker.
#include <string>

#include "fuzz/fuzz_check.hpp"
#include "provision/slice/worker_select.hpp"

using namespace tpuctl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > 512) {
    return 0;
  }
  const int workers = 1 + ((data[0] << 8 | data[1]) % 4096);
  const std::string text = fuzz::text_of(data + 2, size - 2);
  auto picked = provision::parse_worker_selection(text, workers);
  if (!picked) {
    FUZZ_CHECK(!picked.error().message.empty(), text);
    return 0;
  }
  const std::string where = "--worker '" + text + "' of " + std::to_string(workers);
  FUZZ_CHECK(!picked->empty(), where);
  for (size_t i = 0; i < picked->size(); ++i) {
    FUZZ_CHECK((*picked)[i] >= 0 && (*picked)[i] < workers, where);
    FUZZ_CHECK(i == 0 || (*picked)[i - 1] < (*picked)[i], where);
  }
  if (text == "all") {
    FUZZ_CHECK(picked->size() == static_cast<size_t>(workers), where);
  }
  return 0;
}
