// SSH key and signature blobs become OpenSSL objects this way:
//   ssh-ed25519            the raw 32-byte key (EVP_PKEY_new_raw_public_key); the signature is
//                          the raw 64 bytes.
//   ecdsa-sha2-nistpN      the point Q wrapped in a DER SubjectPublicKeyInfo for the named curve
//                          (d2i_PUBKEY); the signature's mpint r and s become a DER
//                          ECDSA-Sig-Value; SHA-256/384/512 for the three curves.
//   ssh-rsa                mpint e and n become a DER RSAPublicKey (d2i_PublicKey); signatures
//                          rsa-sha2-256 / rsa-sha2-512 are PKCS#1 v1.5.
// SSH mpints are already minimal two's-complement big-endian integers, which is also what a DER
// INTEGER holds, so they are copied as they are.
#include "remote/ssh_crypto.hpp"

#include <dlfcn.h>
#include <memory>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/x509.h>

#include "remote/ssh_wire.hpp"

namespace tpuctl::remote::crypto {

const char* const k_signature_algorithms = "ssh-ed25519, ecdsa-sha2-nistp256, ecdsa-sha2-nistp384, "
                                           "ecdsa-sha2-nistp521, rsa-sha2-256, rsa-sha2-512";

namespace {

// Function pointers with OpenSSL's own declarations (the compiler checks them), bound by name
// in the library loaded RTLD_LOCAL: nothing here defines an OpenSSL symbol.
struct Api {
  decltype(&::EVP_PKEY_new_raw_public_key) new_raw_public_key = nullptr;
  decltype(&::d2i_PUBKEY) d2i_pubkey = nullptr;
  decltype(&::d2i_PublicKey) d2i_public_key = nullptr;
  decltype(&::EVP_PKEY_free) pkey_free = nullptr;
  decltype(&::EVP_MD_CTX_new) md_ctx_new = nullptr;
  decltype(&::EVP_MD_CTX_free) md_ctx_free = nullptr;
  decltype(&::EVP_DigestVerifyInit) digest_verify_init = nullptr;
  decltype(&::EVP_DigestVerify) digest_verify = nullptr;
  decltype(&::EVP_sha1) sha1 = nullptr;
  decltype(&::EVP_sha256) sha256 = nullptr;
  decltype(&::EVP_sha384) sha384 = nullptr;
  decltype(&::EVP_sha512) sha512 = nullptr;
  decltype(&::HMAC) hmac = nullptr;
  std::string error;
};

template <typename F>
void bind(void* lib, const char* name, F& out, std::string& error) {
  out = reinterpret_cast<F>(::dlsym(lib, name));
  if (out == nullptr && error.empty()) {
    error = std::string("libcrypto.so.3 has no '") + name + "' (install libssl3)";
  }
}

Api load() {
  Api a;
  void* lib = ::dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    a.error = std::string("cannot load libcrypto.so.3, which checking certificates needs: ") +
              (why ? why : "unknown error") + " (install libssl3)";
    return a;
  }
  std::string& e = a.error;
  bind(lib, "EVP_PKEY_new_raw_public_key", a.new_raw_public_key, e);
  bind(lib, "d2i_PUBKEY", a.d2i_pubkey, e);
  bind(lib, "d2i_PublicKey", a.d2i_public_key, e);
  bind(lib, "EVP_PKEY_free", a.pkey_free, e);
  bind(lib, "EVP_MD_CTX_new", a.md_ctx_new, e);
  bind(lib, "EVP_MD_CTX_free", a.md_ctx_free, e);
  bind(lib, "EVP_DigestVerifyInit", a.digest_verify_init, e);
  bind(lib, "EVP_DigestVerify", a.digest_verify, e);
  bind(lib, "EVP_sha1", a.sha1, e);
  bind(lib, "EVP_sha256", a.sha256, e);
  bind(lib, "EVP_sha384", a.sha384, e);
  bind(lib, "EVP_sha512", a.sha512, e);
  bind(lib, "HMAC", a.hmac, e);
  return a; // the library stays loaded for the life of the process
}

const Api& api() {
  static const Api a = load();
  return a;
}

std::string der_length(size_t n) {
  std::string out;
  if (n < 0x80) {
    out.push_back(static_cast<char>(n));
    return out;
  }
  std::string bytes;
  for (; n > 0; n >>= 8) {
    bytes.insert(bytes.begin(), static_cast<char>(n & 0xff));
  }
  out.push_back(static_cast<char>(0x80 | bytes.size()));
  return out + bytes;
}

std::string der(unsigned char tag, std::string_view content) {
  std::string out(1, static_cast<char>(tag));
  out += der_length(content.size());
  out.append(content);
  return out;
}

// An SSH mpint as a DER INTEGER (an empty mpint is zero).
std::string der_integer(std::string_view mpint) {
  return der(0x02, mpint.empty() ? std::string_view("\0", 1) : mpint);
}

struct Curve {
  const char* name;     // "nistp256"
  std::string_view oid; // the curve's OID, DER-encoded with its tag
  size_t point = 0;     // bytes of an uncompressed point
  int digest = 0;       // 256, 384, 512
};

const Curve* curve_of(std::string_view name) {
  static const Curve curves[] = {
      {"nistp256", std::string_view("\x06\x08\x2a\x86\x48\xce\x3d\x03\x01\x07", 10), 65, 256},
      {"nistp384", std::string_view("\x06\x05\x2b\x81\x04\x00\x22", 7), 97, 384},
      {"nistp521", std::string_view("\x06\x05\x2b\x81\x04\x00\x23", 7), 133, 512},
  };
  for (const auto& c : curves) {
    if (name == c.name) {
      return &c;
    }
  }
  return nullptr;
}

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { api().pkey_free(k); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

Error bad(const std::string& why) {
  return Error{ErrorKind::auth, why};
}

Status verify_with(EVP_PKEY* key, const EVP_MD* md, std::string_view sig, std::string_view data) {
  const Api& a = api();
  EVP_MD_CTX* ctx = a.md_ctx_new();
  if (ctx == nullptr) {
    return bad("out of memory verifying a signature");
  }
  int rc = a.digest_verify_init(ctx, nullptr, md, nullptr, key);
  if (rc == 1) {
    rc = a.digest_verify(ctx, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                         reinterpret_cast<const unsigned char*>(data.data()), data.size());
  }
  a.md_ctx_free(ctx);
  if (rc != 1) {
    return bad("the signature does not verify");
  }
  return tpuctl::ok();
}

} // namespace

Status verify(std::string_view public_key, std::string_view signature, std::string_view data) {
  const Api& a = api();
  if (!a.error.empty()) {
    return bad(a.error);
  }
  wire::Reader key(public_key);
  const std::string_view key_type = key.string();
  wire::Reader sig(signature);
  const std::string_view algorithm = sig.string();
  const std::string_view sig_bytes = sig.string();
  if (key.failed() || sig.failed() || !sig.at_end()) {
    return bad("the signature or the signing key is malformed");
  }
  const std::string unsupported = "signature algorithm '" + std::string(algorithm) + "' with a '" +
                                  std::string(key_type) + "' key is not supported (tpuctl checks " +
                                  k_signature_algorithms + ")";
  if (key_type == "ssh-ed25519") {
    std::string_view pk = key.string();
    if (algorithm != "ssh-ed25519") {
      return bad(unsupported);
    }
    if (key.failed() || !key.at_end() || pk.size() != 32) {
      return bad("the ssh-ed25519 signing key is malformed");
    }
    Pkey k(a.new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                reinterpret_cast<const unsigned char*>(pk.data()), pk.size()));
    if (!k) {
      return bad("the ssh-ed25519 signing key is not valid");
    }
    return verify_with(k.get(), nullptr, sig_bytes, data);
  }
  if (key_type.rfind("ecdsa-sha2-", 0) == 0) {
    std::string_view curve_name = key.string();
    std::string_view point = key.string();
    const Curve* curve = curve_of(curve_name);
    if (key.failed() || !key.at_end() || curve == nullptr || key_type.substr(11) != curve_name) {
      return bad("the " + std::string(key_type) +
                 " signing key is malformed or its curve is "
                 "not supported");
    }
    if (algorithm != key_type) {
      return bad(unsupported);
    }
    if (point.size() != curve->point) {
      return bad("the " + std::string(key_type) + " signing key is malformed");
    }
    static const std::string_view ec_oid("\x06\x07\x2a\x86\x48\xce\x3d\x02\x01", 9);
    std::string bits(1, '\0');
    bits.append(point);
    const std::string spki =
        der(0x30, der(0x30, std::string(ec_oid) + std::string(curve->oid)) + der(0x03, bits));
    const auto* p = reinterpret_cast<const unsigned char*>(spki.data());
    Pkey k(a.d2i_pubkey(nullptr, &p, static_cast<long>(spki.size())));
    if (!k) {
      return bad("the " + std::string(key_type) + " signing key is not valid");
    }
    wire::Reader rs(sig_bytes);
    std::string_view r = rs.string();
    std::string_view s = rs.string();
    if (rs.failed() || !rs.at_end()) {
      return bad("the ecdsa signature is malformed");
    }
    const std::string der_sig = der(0x30, der_integer(r) + der_integer(s));
    const EVP_MD* md = curve->digest == 256   ? a.sha256()
                       : curve->digest == 384 ? a.sha384()
                                              : a.sha512();
    return verify_with(k.get(), md, der_sig, data);
  }
  if (key_type == "ssh-rsa") {
    std::string_view e = key.string();
    std::string_view n = key.string();
    if (key.failed() || !key.at_end()) {
      return bad("the ssh-rsa signing key is malformed");
    }
    const EVP_MD* md = algorithm == "rsa-sha2-256"   ? a.sha256()
                       : algorithm == "rsa-sha2-512" ? a.sha512()
                                                     : nullptr;
    if (md == nullptr) {
      return bad(unsupported);
    }
    const std::string rsa = der(0x30, der_integer(n) + der_integer(e));
    const auto* p = reinterpret_cast<const unsigned char*>(rsa.data());
    Pkey k(a.d2i_public_key(EVP_PKEY_RSA, nullptr, &p, static_cast<long>(rsa.size())));
    if (!k) {
      return bad("the ssh-rsa signing key is not valid");
    }
    return verify_with(k.get(), md, sig_bytes, data);
  }
  return bad(unsupported);
}

std::optional<std::string> hmac_sha1(std::string_view key, std::string_view data) {
  const Api& a = api();
  if (!a.error.empty()) {
    return std::nullopt;
  }
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (a.hmac(a.sha1(), key.data(), static_cast<int>(key.size()),
             reinterpret_cast<const unsigned char*>(data.data()), data.size(), out,
             &len) == nullptr) {
    return std::nullopt;
  }
  return std::string(reinterpret_cast<const char*>(out), len);
}

} // namespace tpuctl::remote::crypto
