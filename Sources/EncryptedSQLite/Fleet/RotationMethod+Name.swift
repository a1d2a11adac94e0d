extension RotationMethod {
    /// A short name for reports: `page re-encryption`, `engine rekey` or `export`.
    public var name: String {
        switch self {
        case .pageReencryption: return "page re-encryption"
        case .inPlace: return "engine rekey"
        case .export: return "export"
        }
    }
}
