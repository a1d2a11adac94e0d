import EncryptedSQLite
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A key-encryption key in HashiCorp Vault's transit engine: Vault wraps and unwraps the data
/// keys, and its key never leaves Vault. The key must be an AEAD type (`aes256-gcm96`, the
/// default), so that Vault authenticates the wrapping context (`associated_data`, Vault 1.13+).
struct VaultTransitKEK: KeyEncryptionKey {
    /// The id wrapped values name in `wrapped_by:`.
    let id: String
    /// Vault's address, such as `https://vault.internal:8200`.
    let address: URL
    /// The transit key's name (`vault write -f transit/keys/app-kek`).
    let keyName: String
    /// A Vault token allowed to use `transit/encrypt/<keyName>` and `transit/decrypt/<keyName>`.
    let token: String

    enum Failure: Error, CustomStringConvertible {
        case vault(status: Int, errors: [String])
        case unexpectedAnswer

        var description: String {
            switch self {
            case let .vault(status, errors): "Vault answered \(status): \(errors.joined(separator: "; "))"
            case .unexpectedAnswer: "Vault's answer has no data"
            }
        }
    }

    func wrap(_ dataKey: DataKey, context: KeyWrappingContext) throws -> [UInt8] {
        let plaintext = dataKey.withUnsafeBytes { Data($0).base64EncodedString() }
        let answer = try call("encrypt", [
            "plaintext": plaintext, "associated_data": Data(context.associatedData).base64EncodedString(),
        ])
        guard let ciphertext = answer["ciphertext"] else { throw Failure.unexpectedAnswer }
        return Array(ciphertext.utf8)   // "vault:v1:…": Vault's own format, stored as it is
    }

    func unwrap(_ wrapped: [UInt8], context: KeyWrappingContext) throws -> DataKey {
        let answer = try call("decrypt", [
            "ciphertext": String(decoding: wrapped, as: UTF8.self),
            "associated_data": Data(context.associatedData).base64EncodedString(),
        ])
        guard let plaintext = answer["plaintext"], var bytes = Data(base64Encoded: plaintext) else { throw Failure.unexpectedAnswer }
        defer { bytes.resetBytes(in: 0..<bytes.count) }
        return try DataKey(copying: bytes)
    }

    /// POSTs `body` to `transit/<operation>/<keyName>` and returns the answer's `data`. Blocks the
    /// calling thread: a key list is built once, before any database opens.
    private func call(_ operation: String, _ body: [String: String]) throws -> [String: String] {
        var request = URLRequest(url: address.appendingPathComponent("v1/transit/\(operation)/\(keyName)"))
        request.httpMethod = "POST"
        request.setValue(token, forHTTPHeaderField: "X-Vault-Token")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONEncoder().encode(body)
        struct Answer: Decodable { let data: [String: String]?; let errors: [String]? }
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Result<(Data, Int), any Error> = .failure(Failure.unexpectedAnswer)
        URLSession.shared.dataTask(with: request) { data, response, error in
            if let error { result = .failure(error) } else { result = .success((data ?? Data(), (response as? HTTPURLResponse)?.statusCode ?? 0)) }
            done.signal()
        }.resume()
        done.wait()
        let (data, status) = try result.get()
        let answer = try JSONDecoder().decode(Answer.self, from: data)
        guard status == 200, let fields = answer.data else { throw Failure.vault(status: status, errors: answer.errors ?? []) }
        return fields
    }
}
