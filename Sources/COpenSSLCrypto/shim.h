#ifndef COPENSSLCRYPTO_SHIM_H
#define COPENSSLCRYPTO_SHIM_H

// OpenSSL's libcrypto: the same library libsqlcipher uses for its own key derivation and
// encryption. EncryptedSQLite uses it to derive a passphrase's key once per file (PBKDF2-HMAC-SHA1,
// as SQLCipher 3 does), so that further connections can be keyed without another derivation.
#include <openssl/evp.h>

#endif
