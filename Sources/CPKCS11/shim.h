#ifndef CPKCS11_SHIM_H
#define CPKCS11_SHIM_H

// The PKCS#11 (Cryptoki) types and constants from p11-kit's header (libp11-kit-dev). Nothing is
// linked: a token's module is loaded at run time with dlopen and C_GetFunctionList, so the
// package depends on no particular vendor's library.
#include <p11-kit/pkcs11.h>

#endif
