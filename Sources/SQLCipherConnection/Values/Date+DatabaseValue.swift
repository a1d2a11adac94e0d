import Foundation

extension Date: DatabaseValueConvertible {
    /// Stored as text in SQLite's own `YYYY-MM-DD HH:MM:SS.SSS` format, in UTC, with millisecond
    /// precision (`2024-03-01 10:00:00.250`): SQL date functions read it, and text order is time
    /// order.
    public var databaseValue: DatabaseValue { .text(SQLiteDateFormat.string(from: self)) }

    /// Reads the date forms SQLite's date functions read:
    ///
    /// - text in ISO-8601 / SQLite form: `YYYY-MM-DD`, optionally followed by `T` or a space and
    ///   `HH:MM`, `HH:MM:SS` or `HH:MM:SS.fraction` (any number of digits), optionally followed by
    ///   `Z` or an offset `±HH:MM` (also `±HHMM`, `±HH`); text without an offset is UTC, as in
    ///   SQLite (`2024-03-01T10:00:00Z`, `2024-03-01 10:00:00`, `2025-01-01`,
    ///   `2024-03-01T10:00:00.5+02:00`);
    /// - an integer: Unix time, seconds since 1970-01-01 00:00:00 UTC (`unixepoch()`,
    ///   `strftime('%s')` cast to an integer);
    /// - a real: a Julian day when it is in SQLite's Julian-day range `0 ..< 5373484.5` (what
    ///   `julianday()` returns), Unix time in seconds otherwise — the rule of SQLite's `auto`
    ///   modifier. So a real Unix time before 1970-03-04 reads as a Julian day.
    ///
    /// Returns `nil` for anything else, including impossible dates (`2024-02-30`) and times
    /// (`25:00`).
    public init?(databaseValue: DatabaseValue) {
        switch databaseValue {
        case .text(let text):
            guard let date = SQLiteDateFormat.date(from: text) else { return nil }
            self = date
        case .integer(let seconds): self = Date(timeIntervalSince1970: TimeInterval(seconds))
        case .real(let number):
            self = SQLiteDateFormat.julianDayRange.contains(number)
                ? SQLiteDateFormat.date(julianDay: number) : Date(timeIntervalSince1970: number)
        default: return nil
        }
    }
}

/// SQLite's date forms: the text `Date` is stored as (UTC, millisecond precision), and the text,
/// Julian-day and Unix-time forms it reads.
enum SQLiteDateFormat {
    /// What `Date` reads, for error messages.
    static let acceptedForms = "ISO-8601 text such as 2024-03-01T10:00:00Z, 2024-03-01 10:00:00.000+02:00 or 2025-01-01, a Julian day (REAL), or Unix seconds (INTEGER or REAL)"

    /// The reals read as Julian days (SQLite's `auto` modifier): -4713-11-24 12:00 to
    /// 9999-12-31 23:59:59.999.
    static let julianDayRange = 0.0..<5_373_484.5

    static func string(from date: Date) -> String {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
        let seconds = Int64((milliseconds / 1000).rounded(.down))
        let millis = Int(milliseconds - Double(seconds) * 1000)
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(
            format: "%04d-%02d-%02d %02d:%02d:%02d.%03d",
            Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), millis)
    }

    /// The date a Julian day stands for, rounded to the millisecond as SQLite does.
    static func date(julianDay: Double) -> Date {
        // Julian day 2440587.5 is 1970-01-01 00:00:00 UTC: 210,866,760,000,000 ms.
        let milliseconds = (julianDay * 86_400_000).rounded()
        return Date(timeIntervalSince1970: (milliseconds - 210_866_760_000_000) / 1000)
    }

    /// The date of ISO-8601 / SQLite date text, or `nil` when the text is not one.
    ///
    /// The stored form (`YYYY-MM-DD HH:MM:SS.SSS`) is read by the same single pass as the others:
    /// the time zone is only looked for when characters are left after the seconds.
    static func date(from text: String) -> Date? {
        var text = text
        return text.withUTF8 { bytes in
            var parser = DateText(bytes: bytes)
            return parser.date()
        }
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
    /// `days_from_civil`).
    static func days(year: Int, month: Int, day: Int) -> Int {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func daysInMonth(_ month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}

/// One pass over the UTF-8 bytes of date text.
private struct DateText {
    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func date() -> Date? {
        guard let year = digits(4), take(UInt8(ascii: "-")), let month = digits(2), take(UInt8(ascii: "-")),
              let day = digits(2), (1...12).contains(month), day >= 1, day <= SQLiteDateFormat.daysInMonth(month, year: year)
        else { return nil }
        var seconds = SQLiteDateFormat.days(year: year, month: month, day: day) * 86_400
        var fraction = 0.0
        if position < bytes.count {
            guard take(UInt8(ascii: "T")) || take(UInt8(ascii: "t")) || take(UInt8(ascii: " ")),
                  let hour = digits(2), take(UInt8(ascii: ":")), let minute = digits(2), hour < 24, minute < 60
            else { return nil }
            seconds += hour * 3600 + minute * 60
            if take(UInt8(ascii: ":")) {
                guard let second = digits(2), second < 60 else { return nil }
                seconds += second
                if take(UInt8(ascii: ".")) {
                    guard let read = self.fraction() else { return nil }
                    fraction = read
                }
            }
            if position < bytes.count {
                guard let offset = zoneOffset() else { return nil }
                seconds -= offset
            }
        }
        return Date(timeIntervalSince1970: TimeInterval(seconds) + fraction)
    }

    /// `Z`, or `±HH:MM`, `±HHMM`, `±HH` (after optional spaces, as SQLite allows), ending the
    /// text: the offset from UTC in seconds.
    private mutating func zoneOffset() -> Int? {
        while take(UInt8(ascii: " ")) {}
        if take(UInt8(ascii: "Z")) || take(UInt8(ascii: "z")) { return position == bytes.count ? 0 : nil }
        let sign: Int
        if take(UInt8(ascii: "+")) { sign = 1 } else if take(UInt8(ascii: "-")) { sign = -1 } else { return nil }
        guard let hours = digits(2), hours <= 14 else { return nil }
        var minutes = 0
        if position < bytes.count {
            _ = take(UInt8(ascii: ":"))
            guard let read = digits(2), read < 60 else { return nil }
            minutes = read
        }
        guard position == bytes.count else { return nil }
        return sign * (hours * 3600 + minutes * 60)
    }

    /// One or more digits after the decimal point, as a fraction of a second (digits beyond
    /// nanoseconds are read and ignored).
    private mutating func fraction() -> Double? {
        var numerator = 0, scale = 1, count = 0
        while position < bytes.count, let digit = digit(at: position) {
            if count < 9 {
                numerator = numerator * 10 + digit
                scale *= 10
            }
            count += 1
            position += 1
        }
        return count == 0 ? nil : Double(numerator) / Double(scale)
    }

    private mutating func digits(_ count: Int) -> Int? {
        guard position + count <= bytes.count else { return nil }
        var value = 0
        for index in position..<position + count {
            guard let digit = digit(at: index) else { return nil }
            value = value * 10 + digit
        }
        position += count
        return value
    }

    private func digit(at index: Int) -> Int? {
        let byte = bytes[index]
        return byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") ? Int(byte - UInt8(ascii: "0")) : nil
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }
}
