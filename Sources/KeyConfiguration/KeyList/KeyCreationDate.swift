import Foundation

/// The dates a key's `created:` field is written and shown in: `2025-06-01`, a day in UTC.
package enum KeyCreationDate {
    private static var calendar: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }

    /// The start of the day `text` names (`YYYY-MM-DD`, UTC), or `nil` when `text` is not such a
    /// date (wrong shape, or a day that does not exist, such as `2025-02-30`).
    package static func parse(_ text: String) -> Date? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              parts.allSatisfy({ $0.unicodeScalars.allSatisfy { ("0"..."9").contains($0) } }),
              let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2])
        else { return nil }
        let wanted = DateComponents(year: year, month: month, day: day)
        guard let date = calendar.date(from: wanted) else { return nil }
        // `date(from:)` rolls over (month 13 is next January); a real date reads back the same.
        let back = calendar.dateComponents([.year, .month, .day], from: date)
        guard back.year == year, back.month == month, back.day == day else { return nil }
        return date
    }

    /// `2025-06-01` for the start of a day (UTC), else the full time, `2025-06-01T08:30:00Z`.
    package static func text(of date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")!
        let isDay = calendar.startOfDay(for: date) == date
        formatter.formatOptions = isDay ? [.withFullDate] : [.withInternetDateTime]
        return formatter.string(from: date)
    }
}
