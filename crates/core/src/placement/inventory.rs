//! One resource class's inventory on one provider, with Placement's rules.

/// Placement's largest integer (a signed 32-bit column).
pub(crate) const MAX_INT: i64 = i32::MAX as i64;
/// Placement's largest allocation ratio (a single-precision float column).
pub(crate) const MAX_ALLOCATION_RATIO: f64 = 3.40282e38;

/// An inventory as Placement stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct Inventory {
    pub total: i64,
    pub reserved: i64,
    pub min_unit: i64,
    pub max_unit: i64,
    pub step_size: i64,
    pub allocation_ratio: f64,
}

impl Default for Inventory {
    /// Placement's defaults, with a total of zero.
    fn default() -> Self {
        Inventory {
            total: 0,
            reserved: 0,
            min_unit: 1,
            max_unit: MAX_INT,
            step_size: 1,
            allocation_ratio: 1.0,
        }
    }
}

/// Why an inventory is not accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InventoryError {
    #[error("{field} is {value}; it must be between {min} and 2147483647")]
    OutOfRange {
        field: &'static str,
        value: i64,
        min: i64,
    },
    #[error("reserved ({reserved}) is greater than total ({total}); reserved may be at most total")]
    ReservedAboveTotal { reserved: i64, total: i64 },
    #[error("minUnit ({min_unit}) is greater than maxUnit ({max_unit})")]
    MinAboveMax { min_unit: i64, max_unit: i64 },
    #[error("allocationRatio is {0}; it must be greater than 0 and at most 3.40282e38")]
    BadRatio(f64),
}

/// Why an amount cannot be allocated from an inventory (Placement's 409 rules).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CapacityError {
    #[error("{amount} is below minUnit {min_unit}")]
    BelowMinUnit { amount: i64, min_unit: i64 },
    #[error("{amount} is above maxUnit {max_unit}")]
    AboveMaxUnit { amount: i64, max_unit: i64 },
    #[error("{amount} is not a multiple of stepSize {step_size}")]
    NotAStep { amount: i64, step_size: i64 },
    #[error("{amount} more would use {would_use} of a capacity of {capacity}")]
    OverCapacity {
        amount: i64,
        would_use: i64,
        capacity: i64,
    },
}

impl Inventory {
    /// An inventory of `total` with Placement's defaults for the rest.
    pub fn with_total(total: i64) -> Self {
        Inventory {
            total,
            ..Inventory::default()
        }
    }

    /// Every rule the inventory breaks (empty when valid).
    pub fn check(&self) -> Vec<InventoryError> {
        let mut errors = Vec::new();
        for (field, value, min) in [
            ("total", self.total, 1),
            ("reserved", self.reserved, 0),
            ("minUnit", self.min_unit, 1),
            ("maxUnit", self.max_unit, 1),
            ("stepSize", self.step_size, 1),
        ] {
            if value < min || value > MAX_INT {
                errors.push(InventoryError::OutOfRange { field, value, min });
            }
        }
        if self.reserved > self.total {
            errors.push(InventoryError::ReservedAboveTotal {
                reserved: self.reserved,
                total: self.total,
            });
        }
        if self.min_unit > self.max_unit {
            errors.push(InventoryError::MinAboveMax {
                min_unit: self.min_unit,
                max_unit: self.max_unit,
            });
        }
        if !(self.allocation_ratio > 0.0 && self.allocation_ratio <= MAX_ALLOCATION_RATIO) {
            errors.push(InventoryError::BadRatio(self.allocation_ratio));
        }
        errors
    }

    /// `(total - reserved) * allocation_ratio`, truncated as Placement reports it.
    pub fn capacity(&self) -> i64 {
        self.capacity_f64() as i64
    }

    fn capacity_f64(&self) -> f64 {
        // In i128: state read without admission may hold totals that overflow i64.
        (self.total as i128 - self.reserved as i128) as f64 * self.allocation_ratio
    }

    /// Whether `amount` more fits on top of `used`. Capacity is compared as a float, as
    /// Placement does: with total 100 and ratio 0.57, 57 does not fit (100 * 0.57 < 57).
    pub fn admits(&self, used: i64, amount: i64) -> Result<(), CapacityError> {
        if amount < self.min_unit {
            return Err(CapacityError::BelowMinUnit {
                amount,
                min_unit: self.min_unit,
            });
        }
        if amount > self.max_unit {
            return Err(CapacityError::AboveMaxUnit {
                amount,
                max_unit: self.max_unit,
            });
        }
        // A step of zero (possible in state read without admission) admits nothing.
        if amount.checked_rem(self.step_size) != Some(0) {
            return Err(CapacityError::NotAStep {
                amount,
                step_size: self.step_size,
            });
        }
        if !self.fits_capacity(used, amount) {
            return Err(CapacityError::OverCapacity {
                amount,
                would_use: used.saturating_add(amount),
                capacity: self.capacity(),
            });
        }
        Ok(())
    }

    /// Whether `amount` more stays within capacity on top of `used`, the unit rules aside.
    // Written as "not above": a capacity that is not a number refuses nothing.
    #[allow(clippy::neg_cmp_op_on_partial_ord)]
    pub fn fits_capacity(&self, used: i64, amount: i64) -> bool {
        !(used.saturating_add(amount) as f64 > self.capacity_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_placements() {
        let inv = Inventory::with_total(8);
        assert_eq!(
            (inv.reserved, inv.min_unit, inv.max_unit, inv.step_size),
            (0, 1, 2147483647, 1)
        );
        assert_eq!(inv.allocation_ratio, 1.0);
        assert!(inv.check().is_empty());
    }

    #[test]
    fn capacity_is_compared_as_a_float() {
        let inv = Inventory {
            allocation_ratio: 0.57,
            ..Inventory::with_total(100)
        };
        assert_eq!(inv.capacity(), 56);
        assert!(matches!(
            inv.admits(0, 57),
            Err(CapacityError::OverCapacity { .. })
        ));
        assert!(inv.admits(0, 56).is_ok());
        let over = Inventory {
            allocation_ratio: 16.0,
            reserved: 2,
            ..Inventory::with_total(10)
        };
        assert_eq!(over.capacity(), 128);
        assert!(over.admits(120, 8).is_ok());
        assert!(over.admits(121, 8).is_err());
    }

    #[test]
    fn unit_rules() {
        let inv = Inventory {
            min_unit: 2,
            max_unit: 8,
            step_size: 2,
            ..Inventory::with_total(16)
        };
        assert!(matches!(
            inv.admits(0, 1),
            Err(CapacityError::BelowMinUnit { .. })
        ));
        assert!(matches!(
            inv.admits(0, 10),
            Err(CapacityError::AboveMaxUnit { .. })
        ));
        assert!(matches!(
            inv.admits(0, 3),
            Err(CapacityError::NotAStep { .. })
        ));
        // step is not offset by min_unit: 4 is fine with min 2, step 2; 6 with min 3 step 2 is too.
        assert!(inv.admits(0, 4).is_ok());
        let odd = Inventory {
            min_unit: 3,
            step_size: 2,
            ..Inventory::with_total(16)
        };
        assert!(odd.admits(0, 3).is_err());
        assert!(odd.admits(0, 4).is_ok());
    }

    #[test]
    fn check_lists_every_broken_rule() {
        let inv = Inventory {
            total: 0,
            reserved: 5,
            min_unit: 9,
            max_unit: 4,
            step_size: 0,
            allocation_ratio: 0.0,
        };
        let errors = inv.check();
        assert_eq!(errors.len(), 5, "{errors:?}");
        assert!(errors.contains(&InventoryError::ReservedAboveTotal {
            reserved: 5,
            total: 0
        }));
        assert!(errors.contains(&InventoryError::BadRatio(0.0)));
    }
}
