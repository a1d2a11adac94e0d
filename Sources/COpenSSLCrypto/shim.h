#ifndef COPENSSLCRYPTO_SHIM_H
#define COPENSSLCRYPTO_SHIM_H

// OpenSSL's libcrypto: the same library libsqlcipher uses for its own key derivation and
// encryption. EncryptedSQLite uses it
// - to derive a passphrase's key once per file (PBKDF2-HMAC-SHA1, as SQLCipher 3 does), so that
//   further connections can be keyed without another derivation;
// - to re-encrypt pages in SQLCipher 3's page format during a key rotation (AES-256-CBC,
//   HMAC-SHA1 through the EVP_MAC interface, random IVs).
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#endif
