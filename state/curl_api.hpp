// libcurl, loaded on first use (dlopen) instead of linked: only the etcd store needs HTTP, and
// libcurl brings 27 shared libraries (GnuTLS, Kerberos, LDAP, SASL, RTMP...) whose loading and
// symbol binding made up most of every tpuctl process's start, the agent's on every worker
// included. Git keeps curl out of its main binary (git-remote-http) for the same reason.
// Still Debian's libcurl: libcurl4-openssl-dev to build (for <curl/curl.h>), libcurl4 to run.
#pragma once

#include <string>

#include <curl/curl.h>

namespace tpuctl::state::etcd {

struct CurlApi {
  CURLcode (*global_init)(long flags) = nullptr;
  CURL* (*easy_init)() = nullptr;
  void (*easy_cleanup)(CURL*) = nullptr;
  void (*easy_reset)(CURL*) = nullptr;
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...) = nullptr;
  CURLcode (*easy_perform)(CURL*) = nullptr;
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...) = nullptr;
  const char* (*easy_strerror)(CURLcode) = nullptr;
  curl_slist* (*slist_append)(curl_slist*, const char*) = nullptr;
  void (*slist_free_all)(curl_slist*) = nullptr;
  // Empty when loaded; else what failed, e.g. "cannot load libcurl.so.4: ... (install libcurl4)".
  std::string error;
  bool ok() const { return error.empty(); }
};

// Loads libcurl.so.4 once per process (thread-safe) and calls curl_global_init. Never fails:
// a library that cannot be loaded is reported in CurlApi::error.
const CurlApi& curl_api();

} // namespace tpuctl::state::etcd
