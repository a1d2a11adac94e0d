#ifndef CSQLCIPHER_SHIM_H
#define CSQLCIPHER_SHIM_H

// sqlite3_key / sqlite3_rekey are declared only when SQLITE_HAS_CODEC is defined, and
// pkg-config's `sqlcipher` flags do not define it.
#ifndef SQLITE_HAS_CODEC
#define SQLITE_HAS_CODEC 1
#endif

// The explicit sqlcipher/ prefix makes sure libsqlite3-dev's <sqlite3.h> is never picked up:
// both libraries export the same symbols, and mixing them crashes in sqlite3_key.
#include <sqlcipher/sqlite3.h>

#endif
