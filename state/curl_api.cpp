#include "state/curl_api.hpp"

#include <dlfcn.h>
#include <mutex>

namespace tpuctl::state::etcd {

namespace {

template <typename F>
bool bind(void* lib, const char* name, F& out, std::string& error) {
  out = reinterpret_cast<F>(::dlsym(lib, name));
  if (out == nullptr && error.empty()) {
    error = std::string("libcurl.so.4 has no '") + name + "' (install libcurl4 7.68 or later)";
  }
  return out != nullptr;
}

CurlApi load() {
  CurlApi api;
  void* lib = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    api.error = std::string("cannot load libcurl.so.4, which the etcd store needs: ") +
                (why ? why : "unknown error") + " (install libcurl4)";
    return api;
  }
  std::string& e = api.error;
  bind(lib, "curl_global_init", api.global_init, e);
  bind(lib, "curl_easy_init", api.easy_init, e);
  bind(lib, "curl_easy_cleanup", api.easy_cleanup, e);
  bind(lib, "curl_easy_reset", api.easy_reset, e);
  bind(lib, "curl_easy_setopt", api.easy_setopt, e);
  bind(lib, "curl_easy_perform", api.easy_perform, e);
  bind(lib, "curl_easy_getinfo", api.easy_getinfo, e);
  bind(lib, "curl_easy_strerror", api.easy_strerror, e);
  bind(lib, "curl_slist_append", api.slist_append, e);
  bind(lib, "curl_slist_free_all", api.slist_free_all, e);
  if (api.ok()) {
    api.global_init(CURL_GLOBAL_DEFAULT);
  }
  return api; // the library stays loaded for the life of the process
}

} // namespace

const CurlApi& curl_api() {
  static const CurlApi api = load();
  return api;
}

} // namespace tpuctl::state::etcd
