#include "remote/line_splitter.hpp"

namespace tpuctl::remote {

void LineSplitter::feed(std::string_view data, const Emit& emit) {
  while (!data.empty()) {
    size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      m_partial.append(data);
      // A pathological line (binary output, no newline) is handed out in pieces rather than
      // held without bound.
      while (m_partial.size() >= m_max_line) {
        emit(std::string_view(m_partial).substr(0, m_max_line), false);
        m_partial.erase(0, m_max_line);
      }
      return;
    }
    if (m_partial.empty()) {
      emit(data.substr(0, nl), true);
    } else {
      m_partial.append(data.substr(0, nl));
      emit(m_partial, true);
      m_partial.clear();
    }
    data.remove_prefix(nl + 1);
  }
}

void LineSplitter::finish(const Emit& emit) {
  if (!m_partial.empty()) {
    emit(m_partial, false);
    m_partial.clear();
  }
}

} // namespace tpuctl::remote
