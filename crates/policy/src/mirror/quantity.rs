//! Kubernetes quantities (`500m`, `4`, `16Gi`, `1.5e9`) read exactly and turned into whole
//! Placement units, rounded the way the caller says.

/// Why a quantity cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "{0:?} is not a Kubernetes quantity (a number with an optional suffix: m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei, or an exponent such as e3)"
    )]
    Unparseable(String),
    #[error("{0:?} is negative")]
    Negative(String),
    #[error("{0:?} is too large")]
    TooLarge(String),
}

/// Which way a fraction of a unit goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// What a Node offers: a part of a unit cannot be given.
    Down,
    /// What a pod takes: a part of a unit is taken whole, so pods and Servers never share it.
    Up,
}

/// A Placement unit in the quantity's base unit: `per` base units make one (`1` for cores
/// and counts, 2^20 for MiB of bytes, 2^30 for GiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    pub per: u128,
}

impl Unit {
    /// `amount` of this unit as a Kubernetes quantity: `2`, `512Mi`, `20Gi`.
    pub fn quantity(self, amount: i64) -> String {
        let suffix = match self.per {
            p if p == MIB.per => "Mi",
            p if p == GIB.per => "Gi",
            _ => "",
        };
        format!("{amount}{suffix}")
    }
}

/// Whole cores, or a count of a resource.
pub const COUNT: Unit = Unit { per: 1 };
/// MiB, of bytes.
pub const MIB: Unit = Unit { per: 1 << 20 };
/// GiB, of bytes.
pub const GIB: Unit = Unit { per: 1 << 30 };

/// A non-negative quantity, exactly: `digits × 10^e10 × 2^e2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Exact {
    digits: u128,
    e10: i32,
    e2: u32,
}

/// The largest exponent read: beyond it no Node or pod quantity is meaningful.
const MAX_EXPONENT: i32 = 30;

fn parse(text: &str) -> Result<Exact, QuantityError> {
    let bad = || QuantityError::Unparseable(text.to_string());
    let trimmed = text.trim();
    let (negative, rest) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err(bad());
    }
    let (mut e10, e2): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        s if s.starts_with(['e', 'E']) => (s[1..].parse::<i32>().map_err(|_| bad())?, 0),
        _ => return Err(bad()),
    };
    if e10.abs() > MAX_EXPONENT {
        return Err(QuantityError::TooLarge(text.to_string()));
    }
    let mut digits: u128 = 0;
    for c in whole.chars().chain(fraction.chars()) {
        digits = digits
            .checked_mul(10)
            .and_then(|d| d.checked_add(u128::from(c as u8 - b'0')))
            .ok_or_else(|| QuantityError::TooLarge(text.to_string()))?;
    }
    if negative && digits != 0 {
        return Err(QuantityError::Negative(text.to_string()));
    }
    e10 -= fraction.len() as i32;
    Ok(Exact { digits, e10, e2 })
}

/// The quantity in whole `unit`s, rounded as asked.
pub fn in_units(text: &str, unit: Unit, rounding: Rounding) -> Result<i64, QuantityError> {
    let large = || QuantityError::TooLarge(text.to_string());
    let q = parse(text)?;
    let pow10 = |e: i32| 10u128.checked_pow(e.unsigned_abs());
    let mut numerator = q
        .digits
        .checked_mul(1u128.checked_shl(q.e2).ok_or_else(large)?)
        .ok_or_else(large)?;
    let mut denominator = unit.per;
    if q.e10 >= 0 {
        numerator = numerator
            .checked_mul(pow10(q.e10).ok_or_else(large)?)
            .ok_or_else(large)?;
    } else {
        denominator = denominator
            .checked_mul(pow10(q.e10).ok_or_else(large)?)
            .ok_or_else(large)?;
    }
    let whole = match rounding {
        Rounding::Down => numerator / denominator,
        Rounding::Up => numerator.div_ceil(denominator),
    };
    i64::try_from(whole).map_err(|_| large())
}

/// The quantity in thousandths of its unit (millicores), rounded up: what kube-scheduler
/// sums for a pod's CPU.
pub fn in_thousandths(text: &str) -> Result<i64, QuantityError> {
    let q = parse(text)?;
    let shifted = Exact {
        e10: q.e10 + 3,
        ..q
    };
    let rewritten = format!("{}e{}", shifted.digits, shifted.e10);
    // The binary factor of a CPU quantity (`1Ki` cores) is rare; read it exactly.
    let whole = in_units(&rewritten, COUNT, Rounding::Up)?;
    whole
        .checked_mul(1i64 << q.e2)
        .ok_or_else(|| QuantityError::TooLarge(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_suffix_exactly() {
        assert_eq!(in_units("4", COUNT, Rounding::Down), Ok(4));
        assert_eq!(in_units("3800m", COUNT, Rounding::Down), Ok(3));
        assert_eq!(in_units("3800m", COUNT, Rounding::Up), Ok(4));
        assert_eq!(in_units("100m", COUNT, Rounding::Up), Ok(1));
        assert_eq!(in_units("0.5", COUNT, Rounding::Up), Ok(1));
        assert_eq!(in_units("16Gi", MIB, Rounding::Down), Ok(16384));
        assert_eq!(in_units("16318496Ki", MIB, Rounding::Down), Ok(15936));
        assert_eq!(in_units("128974848", MIB, Rounding::Up), Ok(123));
        assert_eq!(in_units("129e6", MIB, Rounding::Down), Ok(123));
        assert_eq!(in_units("123Mi", MIB, Rounding::Down), Ok(123));
        assert_eq!(in_units("1G", MIB, Rounding::Up), Ok(954));
        assert_eq!(in_units("100Gi", GIB, Rounding::Down), Ok(100));
        assert_eq!(in_units("1.5Gi", GIB, Rounding::Up), Ok(2));
        assert_eq!(in_units("1E", COUNT, Rounding::Down), Ok(10i64.pow(18)));
        assert_eq!(in_units("+2", COUNT, Rounding::Down), Ok(2));
        assert_eq!(in_units("-0", COUNT, Rounding::Down), Ok(0));
        assert_eq!(in_thousandths("250m"), Ok(250));
        assert_eq!(in_thousandths("1.5"), Ok(1500));
        assert_eq!(
            in_thousandths("1u"),
            Ok(1),
            "a part of a millicore is taken whole"
        );
    }

    #[test]
    fn refuses_what_is_not_a_quantity_with_a_message() {
        for bad in ["", "abc", "1.2.3", "4 cores", "1Qi", "1e", "m", "."] {
            let e = in_units(bad, COUNT, Rounding::Down).unwrap_err();
            assert!(matches!(e, QuantityError::Unparseable(_)), "{bad}: {e}");
            assert!(e.to_string().contains("Kubernetes quantity"));
        }
        assert_eq!(
            in_units("-1", COUNT, Rounding::Down),
            Err(QuantityError::Negative("-1".into()))
        );
        for large in ["1e99", "99999999999999999999999999999999999999999", "9Ei"] {
            assert!(
                matches!(
                    in_units(large, COUNT, Rounding::Down),
                    Err(QuantityError::TooLarge(_))
                ),
                "{large}"
            );
        }
    }
}
