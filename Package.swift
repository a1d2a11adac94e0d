// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "EncryptedSQLite",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "EncryptedSQLite", targets: ["EncryptedSQLite"]),
        .executable(name: "rekey", targets: ["rekey"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
        // Tests only: generators and seeded random numbers for the fuzz tests.
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
    ],
    targets: [
        // SQLCipher from Debian's libsqlcipher-dev. The shim defines SQLITE_HAS_CODEC and includes
        // <sqlcipher/sqlite3.h>, so the plain libsqlite3 header can never be picked up.
        .systemLibrary(
            name: "CSQLCipher",
            pkgConfig: "sqlcipher",
            providers: [.apt(["libsqlcipher-dev"])]
        ),
        // OpenSSL's libcrypto (libssl-dev), which libsqlcipher links already: PBKDF2 for deriving
        // a passphrase's key once per file.
        .systemLibrary(
            name: "COpenSSLCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // The PKCS#11 header (p11-kit's, from libp11-kit-dev) for tokens and HSMs, with nothing to link:
        // a token's module is loaded at run time (dlopen, C_GetFunctionList).
        .systemLibrary(
            name: "CPKCS11",
            pkgConfig: "p11-kit-1",
            providers: [.apt(["libp11-kit-dev"])]
        ),
        // The layers, bottom up. Each target depends only on targets above it in this list, so
        // the compiler rejects a cycle or a layer that reaches up (see the Architecture article).
        //
        // Durable file-system steps (fsync, link, rename, locked temporaries) and the seam tests
        // use to simulate power cuts.
        .target(name: "DurableFiles"),
        // The connection API: Connection, Statement, Row, values, transactions, SQL functions,
        // records, SQLite errors. The one path to SQLite.
        .target(name: "SQLCipherConnection", dependencies: ["CSQLCipher", "DurableFiles"]),
        // SQLCipher's file formats: key material in zeroed buffers, cipher settings, the linked
        // engine, page formats and key derivation (libcrypto), reading a file's header and salt.
        .target(
            name: "CipherFormats",
            dependencies: [
                // libcrypto (the one SQLCipher links): PBKDF2, HMAC, AES-256-CBC pages, AES-256-GCM
                // key wrapping, SHA-256. No second crypto library.
                "SQLCipherConnection", "DurableFiles", "COpenSSLCrypto",
                // The Telemetry seam: counters, timers and spans; nothing is emitted until the app
                // bootstraps a backend.
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // Migrations, layered over the connection API alone.
        .target(name: "DatabaseMigrations", dependencies: ["SQLCipherConnection"]),
        // Key configuration: key lists, key sources, the Keys file.
        .target(
            name: "KeyConfiguration",
            dependencies: [
                "CipherFormats", "DurableFiles", .product(name: "Yams", package: "Yams"),
                // PKCS#11 key-encryption keys: the header only; modules are loaded at run time.
                "CPKCS11",
            ]
        ),
        // Opening, rotation, the reader pool, fleets, inspection and the EncryptedDatabase facade.
        // Re-exports the layers below, so `import EncryptedSQLite` is the one import an app needs.
        .target(
            name: "EncryptedSQLite",
            dependencies: [
                "SQLCipherConnection", "CipherFormats", "DatabaseMigrations", "KeyConfiguration", "DurableFiles",
                "COpenSSLCrypto",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "rekey",
            dependencies: [
                "EncryptedSQLite",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // A test VFS over the default unix VFS that reports each file operation and can stop a
        // connection inside it, so that tests take their interleavings from events, not from
        // sleeps (TestSupport's VFSWatch). Not a product: the library never registers it.
        .target(
            name: "PausingVFS",
            dependencies: ["CSQLCipher"],
            path: "Tests/PausingVFS"
        ),
        // Helpers shared by the test targets (temporary folders, the independent sqlcipher shell,
        // fixtures, content digests, the pausing VFS's Swift side). Not a product.
        .target(
            name: "TestSupport",
            dependencies: ["EncryptedSQLite", "CipherFormats", "KeyConfiguration", "PausingVFS"],
            path: "Tests/TestSupport"
        ),
        // The tests, by layer, bottom up (as the library's targets): each target tests one module,
        // in Tests/<Target>. A test file sits in the lowest layer whose behaviour it tests; it may
        // still make its fixtures through TestSupport or an `EncryptedDatabase`.
        .testTarget(
            name: "DurableFilesTests",
            dependencies: ["DurableFiles", "TestSupport"]
        ),
        .testTarget(
            name: "SQLCipherConnectionTests",
            dependencies: ["SQLCipherConnection", "CipherFormats", "KeyConfiguration", "EncryptedSQLite", "TestSupport"]
        ),
        .testTarget(
            name: "CipherFormatsTests",
            dependencies: ["CipherFormats", "SQLCipherConnection", "TestSupport"]
        ),
        .testTarget(
            name: "DatabaseMigrationsTests",
            dependencies: ["DatabaseMigrations", "SQLCipherConnection", "EncryptedSQLite", "TestSupport"]
        ),
        .testTarget(
            name: "KeyConfigurationTests",
            dependencies: ["KeyConfiguration", "CipherFormats", "DurableFiles", "EncryptedSQLite", "TestSupport"]
        ),
        // The top module: opening, rotation, the reader pool, background rotation, fleets,
        // inspection, backups, secrets, the bad-input matrix, fuzzing, the source tree's shape.
        // `rekey` is run by some as the other process that rotates a file.
        .testTarget(
            name: "EncryptedSQLiteTests",
            dependencies: [
                "EncryptedSQLite", "SQLCipherConnection", "CipherFormats", "DatabaseMigrations", "KeyConfiguration",
                "DurableFiles", "CSQLCipher", "TestSupport", "rekey",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Instrumentation", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The rekey command's own code, in-process: parsing, validation and help (no binary started).
        .testTarget(
            name: "RekeyTests",
            dependencies: ["EncryptedSQLite", "rekey", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // A small service built on the library: the code the "A Service with EncryptedSQLite" article
        // shows. The tests build and run it, so the article cannot rot (not a product).
        .executableTarget(
            name: "notes-service-example",
            dependencies: ["EncryptedSQLite", .product(name: "Logging", package: "swift-log")],
            path: "Examples/NotesService"
        ),
        // A key-encryption key in Vault's transit engine, through the KeyEncryptionKey protocol: the
        // code the "Keys from a Key Manager" article shows. Compiled by every build, not run (not a product).
        .executableTarget(
            name: "vault-transit-kek-example",
            dependencies: ["EncryptedSQLite"],
            path: "Examples/VaultTransitKEK"
        ),
        // A small program the crash tests run and kill -9 (not a product).
        .executableTarget(
            name: "crash-harness",
            dependencies: ["EncryptedSQLite", "DurableFiles", "TestSupport", .product(name: "Logging", package: "swift-log")],
            path: "Tests/CrashHarness"
        ),
        // Benchmarks against the raw SQLCipher C API (release build; see Benchmarks/README.md).
        .executableTarget(
            name: "encryptedsqlite-benchmarks",
            // Logging: a handler that captures the background rotation's swap phases (issue 23).
            dependencies: ["EncryptedSQLite", "CSQLCipher", .product(name: "Logging", package: "swift-log")],
            path: "Benchmarks/Sources/Benchmarks"
        ),
        // The fleet figures of issue 22 (release build; see Benchmarks/README.md): master-key rotation
        // against re-encryption, wrapped against passphrase opens, unwraps through SoftHSM2.
        .executableTarget(
            name: "encryptedsqlite-fleet-benchmarks",
            dependencies: [
                // CipherFormats: PBKDF2 for the setup's own KEK derivations (the timed runs derive
                // through the library).
                "EncryptedSQLite", "CSQLCipher", "CipherFormats",
            ],
            path: "Benchmarks/Sources/FleetBenchmarks"
        ),
        // End to end: the programs, run as processes: the `rekey` CLI, the example service, and
        // the crash tests (kill -9 of crash-harness and rekey, power cuts in PowerCut/).
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "EncryptedSQLite", "CipherFormats", "KeyConfiguration", "DurableFiles", "TestSupport",
                "rekey", "crash-harness", "notes-service-example",
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
