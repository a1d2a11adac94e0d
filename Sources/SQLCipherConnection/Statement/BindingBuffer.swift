/// The bytes of the text and blob values bound to one statement, which SQLite reads in place
/// (`SQLITE_STATIC`), as a C program binds a buffer that outlives the step.
///
/// Bound with `SQLITE_TRANSIENT` instead, SQLite copies every value into an allocation of its own
/// when it is bound and frees it when the slot is bound again: with SQLCipher's allocator (which
/// wipes freed memory under a lock) that is most of the cost of binding a short string. Here the
/// bytes go into one buffer kept by the statement, reused for every set of bindings.
///
/// Rules that keep SQLite's pointers valid: a new set of bindings starts with ``startBinding()``,
/// and the statement then binds *every* slot before it steps again (or clears all bindings when a
/// bind fails), so no slot still points at bytes that were overwritten or freed. A buffer that
/// was outgrown during one set of bindings stays allocated until the next set starts. Values
/// larger than ``largestValue`` are not stored (the caller lets SQLite copy them), so the buffer
/// stays small. Bytes are wiped before the buffer is reused or freed: bound values can be secrets.
struct BindingBuffer: ~Copyable {
    /// The largest value stored here, in bytes.
    static let largestValue = 4096

    private var buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    private var used = 0
    /// Outgrown buffers whose bytes SQLite may still point at, until the next set of bindings.
    private var retired: [UnsafeMutableRawBufferPointer] = []

    init() {}

    /// Starts a new set of bindings: wipes the bytes of the previous set.
    mutating func startBinding() {
        if used > 0, let base = buffer.baseAddress {
            base.initializeMemory(as: UInt8.self, repeating: 0, count: used)
        }
        used = 0
        if !retired.isEmpty {
            for old in retired { Self.release(old) }
            retired.removeAll()
        }
    }

    /// A copy of `bytes` that stays valid until the next ``startBinding()``, or `nil` when the
    /// value is larger than ``largestValue`` or empty.
    @inline(__always)
    mutating func store(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawPointer? {
        let count = bytes.count
        guard count > 0, count <= Self.largestValue, let source = bytes.baseAddress else { return nil }
        if used + count > buffer.count { grow(toFit: count) }
        let destination = buffer.baseAddress! + used
        destination.copyMemory(from: source, byteCount: count)
        used += count
        return UnsafeRawPointer(destination)
    }

    /// Starts a new, larger buffer; the old one stays until the next set of bindings.
    private mutating func grow(toFit count: Int) {
        if buffer.baseAddress != nil { retired.append(buffer) }
        buffer = .allocate(byteCount: max(256, 2 * buffer.count, count), alignment: 8)
        used = 0
    }

    deinit {
        Self.release(buffer)
        for old in retired { Self.release(old) }
    }

    private static func release(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        base.initializeMemory(as: UInt8.self, repeating: 0, count: buffer.count)
        base.deallocate()
    }
}
