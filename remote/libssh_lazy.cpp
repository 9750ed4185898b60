// libssh, loaded on first use (dlopen) instead of linked. libssh brings libcrypto, GSSAPI and
// Kerberos (nine shared libraries), whose loading and relocation cost every tpuctl process 1.7
// ms of CPU at start (measured: a hello world linked with -lssh, 2.6 ms against 0.9), though
// only the SSH commands use it. The agent runs on every worker for every provisioning and never
// uses SSH; nor do `qr list` and the other commands that only read the store. So tpuctl links
// no libssh: each function it calls is defined here, with libssh's own declaration (the
// compiler checks the signature against <libssh/libssh.h>), and forwards to the library's,
// looked up once. Still Debian's libssh: libssh-dev to build, libssh-4 to run (the .deb
// depends on it). A libssh that cannot be loaded ends the process as the dynamic loader would
// have at start, exit 127 with what to install, but only when SSH is used.
// Add a function tpuctl starts to use to the list below (the build fails at the link otherwise).
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>

#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/server.h>

namespace {

void* libssh() {
  static void* const lib = [] {
    void* handle = ::dlopen("libssh.so.4", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      std::fprintf(
          stderr,
          "tpuctl: error: cannot load libssh.so.4, which SSH needs: %s (install libssh-4)\n",
          why ? why : "unknown error");
      std::_Exit(127);
    }
    return handle;
  }();
  return lib;
}

void* libssh_symbol(const char* name) {
  void* f = ::dlsym(libssh(), name);
  if (f == nullptr) {
    std::fprintf(stderr,
                 "tpuctl: error: libssh.so.4 has no '%s' (install libssh-4 0.10 or later)\n", name);
    std::_Exit(127);
  }
  return f;
}

} // namespace

// One forwarding definition per libssh function tpuctl calls.
#define TPUCTL_LIBSSH(ret, name, params, args)                                                     \
  extern "C" ret name params {                                                                     \
    using Fn = ret(*) params;                                                                      \
    static const Fn fn = reinterpret_cast<Fn>(libssh_symbol(#name));                               \
    return fn args;                                                                                \
  }

TPUCTL_LIBSSH(int, ssh_channel_change_pty_size, (ssh_channel channel, int cols, int rows),
              (channel, cols, rows))
TPUCTL_LIBSSH(int, ssh_channel_close, (ssh_channel channel), (channel))
TPUCTL_LIBSSH(void, ssh_channel_free, (ssh_channel channel), (channel))
TPUCTL_LIBSSH(int, ssh_channel_get_exit_status, (ssh_channel channel), (channel))
TPUCTL_LIBSSH(int, ssh_channel_is_eof, (ssh_channel channel), (channel))
TPUCTL_LIBSSH(int, ssh_channel_is_closed, (ssh_channel channel), (channel))
TPUCTL_LIBSSH(int, ssh_channel_is_open, (ssh_channel channel), (channel))
TPUCTL_LIBSSH(int, ssh_channel_listen_forward,
              (ssh_session session, const char* address, int port, int* bound_port),
              (session, address, port, bound_port))
TPUCTL_LIBSSH(ssh_channel, ssh_channel_new, (ssh_session session), (session))
TPUCTL_LIBSSH(int, ssh_channel_open_forward,
              (ssh_channel channel, const char* remotehost, int remoteport, const char* sourcehost,
               int localport),
              (channel, remotehost, remoteport, sourcehost, localport))
TPUCTL_LIBSSH(ssh_channel, ssh_channel_open_forward_port,
              (ssh_session session, int timeout_ms, int* destination_port, char** originator,
               int* originator_port),
              (session, timeout_ms, destination_port, originator, originator_port))
TPUCTL_LIBSSH(int, ssh_channel_open_session, (ssh_channel channel), (channel))
TPUCTL_LIBSSH(int, ssh_channel_poll, (ssh_channel channel, int is_stderr), (channel, is_stderr))
TPUCTL_LIBSSH(int, ssh_channel_read_nonblocking,
              (ssh_channel channel, void* dest, uint32_t count, int is_stderr),
              (channel, dest, count, is_stderr))
TPUCTL_LIBSSH(int, ssh_channel_request_exec, (ssh_channel channel, const char* cmd), (channel, cmd))
TPUCTL_LIBSSH(int, ssh_channel_request_pty_size,
              (ssh_channel channel, const char* term, int cols, int rows),
              (channel, term, cols, rows))
TPUCTL_LIBSSH(int, ssh_channel_request_send_signal, (ssh_channel channel, const char* signum),
              (channel, signum))
TPUCTL_LIBSSH(int, ssh_channel_request_shell, (ssh_channel channel), (channel))
TPUCTL_LIBSSH(int, ssh_channel_send_eof, (ssh_channel channel), (channel))
TPUCTL_LIBSSH(uint32_t, ssh_channel_window_size, (ssh_channel channel), (channel))
TPUCTL_LIBSSH(int, ssh_channel_write, (ssh_channel channel, const void* data, uint32_t len),
              (channel, data, len))
TPUCTL_LIBSSH(void, ssh_clean_pubkey_hash, (unsigned char** hash), (hash))
TPUCTL_LIBSSH(int, ssh_connect, (ssh_session session), (session))
TPUCTL_LIBSSH(void, ssh_disconnect, (ssh_session session), (session))
TPUCTL_LIBSSH(int, ssh_event_add_fd,
              (ssh_event event, socket_t fd, short events, ssh_event_callback cb, void* userdata),
              (event, fd, events, cb, userdata))
TPUCTL_LIBSSH(int, ssh_event_add_session, (ssh_event event, ssh_session session), (event, session))
TPUCTL_LIBSSH(int, ssh_event_dopoll, (ssh_event event, int timeout), (event, timeout))
TPUCTL_LIBSSH(void, ssh_event_free, (ssh_event event), (event))
TPUCTL_LIBSSH(ssh_event, ssh_event_new, (void), ())
TPUCTL_LIBSSH(int, ssh_event_remove_fd, (ssh_event event, socket_t fd), (event, fd))
TPUCTL_LIBSSH(int, ssh_event_remove_session, (ssh_event event, ssh_session session),
              (event, session))
TPUCTL_LIBSSH(void, ssh_free, (ssh_session session), (session))
TPUCTL_LIBSSH(const char*, ssh_get_error, (void* error), (error))
TPUCTL_LIBSSH(socket_t, ssh_get_fd, (ssh_session session), (session))
TPUCTL_LIBSSH(char*, ssh_get_fingerprint_hash,
              (enum ssh_publickey_hash_type type, unsigned char* hash, size_t len),
              (type, hash, len))
TPUCTL_LIBSSH(int, ssh_get_publickey_hash,
              (const ssh_key key, enum ssh_publickey_hash_type type, unsigned char** hash,
               size_t* hlen),
              (key, type, hash, hlen))
TPUCTL_LIBSSH(int, ssh_get_server_publickey, (ssh_session session, ssh_key* key), (session, key))
TPUCTL_LIBSSH(int, ssh_get_status, (ssh_session session), (session))
TPUCTL_LIBSSH(int, ssh_is_connected, (ssh_session session), (session))
TPUCTL_LIBSSH(int, ssh_key_cmp, (const ssh_key k1, const ssh_key k2, enum ssh_keycmp_e what),
              (k1, k2, what))
TPUCTL_LIBSSH(void, ssh_key_free, (ssh_key key), (key))
TPUCTL_LIBSSH(enum ssh_keytypes_e, ssh_key_type_from_name, (const char* name), (name))
TPUCTL_LIBSSH(enum ssh_keytypes_e, ssh_key_type, (const ssh_key key), (key))
TPUCTL_LIBSSH(const char*, ssh_key_type_to_char, (enum ssh_keytypes_e type), (type))
TPUCTL_LIBSSH(int, ssh_known_hosts_parse_line,
              (const char* host, const char* line, struct ssh_knownhosts_entry** entry),
              (host, line, entry))
TPUCTL_LIBSSH(void, ssh_knownhosts_entry_free, (struct ssh_knownhosts_entry * entry), (entry))
TPUCTL_LIBSSH(ssh_session, ssh_new, (void), ())
TPUCTL_LIBSSH(int, ssh_options_get, (ssh_session session, enum ssh_options_e type, char** value),
              (session, type, value))
TPUCTL_LIBSSH(int, ssh_options_get_port, (ssh_session session, unsigned int* port_target),
              (session, port_target))
TPUCTL_LIBSSH(int, ssh_options_parse_config, (ssh_session session, const char* filename),
              (session, filename))
TPUCTL_LIBSSH(int, ssh_options_set,
              (ssh_session session, enum ssh_options_e type, const void* value),
              (session, type, value))
TPUCTL_LIBSSH(int, ssh_pki_copy_cert_to_privkey, (const ssh_key cert_key, ssh_key privkey),
              (cert_key, privkey))
TPUCTL_LIBSSH(int, ssh_pki_export_pubkey_base64, (const ssh_key key, char** b64_key),
              (key, b64_key))
TPUCTL_LIBSSH(int, ssh_pki_import_cert_base64,
              (const char* b64_cert, enum ssh_keytypes_e type, ssh_key* pkey),
              (b64_cert, type, pkey))
TPUCTL_LIBSSH(int, ssh_pki_export_privkey_base64,
              (const ssh_key privkey, const char* passphrase, ssh_auth_callback auth_fn,
               void* auth_data, char** b64_key),
              (privkey, passphrase, auth_fn, auth_data, b64_key))
TPUCTL_LIBSSH(int, ssh_pki_import_privkey_base64,
              (const char* b64_key, const char* passphrase, ssh_auth_callback auth_fn,
               void* auth_data, ssh_key* pkey),
              (b64_key, passphrase, auth_fn, auth_data, pkey))
TPUCTL_LIBSSH(int, ssh_pki_import_privkey_file,
              (const char* filename, const char* passphrase, ssh_auth_callback auth_fn,
               void* auth_data, ssh_key* pkey),
              (filename, passphrase, auth_fn, auth_data, pkey))
TPUCTL_LIBSSH(int, ssh_send_keepalive, (ssh_session session), (session))
TPUCTL_LIBSSH(void, ssh_set_blocking, (ssh_session session, int blocking), (session, blocking))
TPUCTL_LIBSSH(enum ssh_known_hosts_e, ssh_session_is_known_server, (ssh_session session), (session))
TPUCTL_LIBSSH(int, ssh_session_update_known_hosts, (ssh_session session), (session))
TPUCTL_LIBSSH(int, ssh_set_channel_callbacks, (ssh_channel channel, ssh_channel_callbacks cb),
              (channel, cb))
TPUCTL_LIBSSH(int, ssh_set_log_callback, (ssh_logging_callback cb), (cb))
TPUCTL_LIBSSH(int, ssh_set_log_level, (int level), (level))
TPUCTL_LIBSSH(void, ssh_string_free_char, (char* s), (s))
TPUCTL_LIBSSH(int, ssh_userauth_publickey,
              (ssh_session session, const char* username, const ssh_key privkey),
              (session, username, privkey))
TPUCTL_LIBSSH(int, ssh_userauth_agent, (ssh_session session, const char* username),
              (session, username))
TPUCTL_LIBSSH(int, ssh_userauth_publickey_auto,
              (ssh_session session, const char* username, const char* passphrase),
              (session, username, passphrase))
