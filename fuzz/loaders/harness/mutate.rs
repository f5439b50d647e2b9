//! Structure-aware mutation of JSON documents, shared by the loader fuzz targets and the
//! brief random runs in the test suites.
//!
//! The input bytes pick a node of a valid document and change it: an edge-case number, a
//! string, `null`, a node of another type taken from the same document, a dropped key, a
//! truncated, shuffled or duplicated array. The result is still JSON, so it reaches the
//! loaders' own checks (sizes, ranges, cross-references) instead of stopping in the
//! parser, which is where random bytes stop.

use arbitrary::{Result, Unstructured};
use serde_json::{Map, Value};

/// Apply one mutation to `doc`, driven by `u`.
pub fn mutate(doc: &mut Value, u: &mut Unstructured) -> Result<()> {
    let donor = pick(doc, u)?.clone();
    let node = descend(doc, u)?;
    apply(node, donor, u)
}

/// Apply between one and `max` mutations (fewer when the input runs out).
pub fn mutate_some(doc: &mut Value, u: &mut Unstructured, max: u8) {
    let n = u.int_in_range(1..=max.max(1)).unwrap_or(1);
    for _ in 0..n {
        if mutate(doc, u).is_err() {
            break;
        }
    }
}

/// A node of `v`: at each level go one step down (a random key or element) with
/// probability 5/6, else stop here.
fn descend<'a>(v: &'a mut Value, u: &mut Unstructured) -> Result<&'a mut Value> {
    let go = u.ratio(5u8, 6u8)?;
    let len = match &*v {
        Value::Object(m) => m.len(),
        Value::Array(a) => a.len(),
        _ => 0,
    };
    if !go || len == 0 {
        return Ok(v);
    }
    let i = u.choose_index(len)?;
    match v {
        Value::Object(m) => descend(m.values_mut().nth(i).expect("index below the length"), u),
        Value::Array(a) => descend(&mut a[i], u),
        other => Ok(other),
    }
}

/// A node of `v` for use elsewhere in the document (a value of another type, or of the
/// same type from another place).
fn pick<'a>(v: &'a Value, u: &mut Unstructured) -> Result<&'a Value> {
    let go = u.ratio(5u8, 6u8)?;
    match v {
        Value::Object(m) if go && !m.is_empty() => {
            let i = u.choose_index(m.len())?;
            pick(m.values().nth(i).expect("index below the length"), u)
        }
        Value::Array(a) if go && !a.is_empty() => {
            let i = u.choose_index(a.len())?;
            pick(&a[i], u)
        }
        _ => Ok(v),
    }
}

/// Integers where sizes, indices and counts break: zero, off-by-one, type limits.
const EDGE_INTS: [i128; 18] = [
    0,
    1,
    -1,
    2,
    3,
    7,
    255,
    256,
    65_535,
    65_536,
    i32::MAX as i128,
    u32::MAX as i128,
    u32::MAX as i128 + 1,
    i64::MAX as i128,
    i64::MIN as i128,
    u64::MAX as i128,
    1 << 40,
    -(1 << 31),
];

/// Floats that overflow `f32`, underflow it, or sit at its limits (JSON has no NaN).
const EDGE_FLOATS: [f64; 10] = [
    0.5,
    -0.0,
    1e39,
    -1e39,
    1e-46,
    f32::MAX as f64,
    f32::MIN_POSITIVE as f64,
    f64::MAX,
    -f64::MAX,
    0.1,
];

fn number(u: &mut Unstructured) -> Result<Value> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => {
            let v = *u.choose(&EDGE_INTS)?;
            if v < 0 {
                Value::from(v as i64)
            } else {
                Value::from(v as u64)
            }
        }
        1 => Value::from(*u.choose(&EDGE_FLOATS)?),
        2 => Value::from(u.arbitrary::<i64>()?),
        _ => {
            let f = u.arbitrary::<f64>()?;
            if f.is_finite() {
                Value::from(f)
            } else {
                Value::from(u.arbitrary::<u32>()?)
            }
        }
    })
}

/// Shift a number by a little: ±1, doubled, negated.
fn nudge(n: &serde_json::Number, u: &mut Unstructured) -> Result<Value> {
    let op = u.int_in_range(0u8..=3)?;
    Ok(if let Some(i) = n.as_i64() {
        match op {
            0 => Value::from(i.wrapping_add(1)),
            1 => Value::from(i.wrapping_sub(1)),
            2 => Value::from(i.wrapping_mul(2)),
            _ => Value::from(i.wrapping_neg()),
        }
    } else if let Some(x) = n.as_u64() {
        match op {
            0 => Value::from(x.wrapping_add(1)),
            1 => Value::from(x.wrapping_sub(1)),
            2 => Value::from(x.wrapping_mul(2)),
            _ => Value::from(-(x as f64)),
        }
    } else {
        let f = n.as_f64().unwrap_or(0.0);
        match op {
            0 => Value::from(f + 1.0),
            1 => Value::from(f - 1.0),
            2 => Value::from(f * 1e6),
            _ => Value::from(-f),
        }
    })
}

fn apply(node: &mut Value, donor: Value, u: &mut Unstructured) -> Result<()> {
    // Half the time keep the node's type, so the file still parses into the loader's
    // types and the mutation reaches its checks (sizes, ranges, references).
    if u.arbitrary::<bool>()? {
        return apply_same_type(node, u);
    }
    match u.int_in_range(0u8..=11)? {
        0 => *node = Value::Null,
        1 => *node = Value::Bool(u.arbitrary()?),
        2 | 3 => *node = number(u)?,
        4 => *node = Value::String(u.arbitrary::<String>()?),
        5 => *node = donor,
        6 => match node {
            Value::Number(n) => *node = nudge(n, u)?,
            _ => *node = number(u)?,
        },
        // shrink: drop elements, a key, or characters
        7 => match node {
            Value::Array(a) => {
                let keep = u.choose_index(a.len() + 1)?;
                a.truncate(keep);
            }
            Value::Object(m) if !m.is_empty() => {
                let i = u.choose_index(m.len())?;
                let key = m.keys().nth(i).cloned().expect("index below the length");
                m.remove(&key);
            }
            Value::String(s) => {
                truncate(s, u)?;
            }
            _ => *node = Value::Array(Vec::new()),
        },
        // grow: repeat an element, add a key
        8 => match node {
            Value::Array(a) if !a.is_empty() => {
                let i = u.choose_index(a.len())?;
                let copies = u.int_in_range(1usize..=4)?;
                for _ in 0..copies {
                    let v = a[i].clone();
                    a.push(v);
                }
            }
            Value::Array(a) => a.push(donor),
            Value::Object(m) => {
                m.insert(u.arbitrary::<String>()?, donor);
            }
            _ => *node = Value::Array(vec![donor]),
        },
        // reorder
        9 => match node {
            Value::Array(a) if a.len() > 1 => {
                let (i, j) = (u.choose_index(a.len())?, u.choose_index(a.len())?);
                a.swap(i, j);
            }
            _ => *node = Value::Object(Map::new()),
        },
        10 => *node = Value::Array(Vec::new()),
        _ => *node = Value::Object(Map::new()),
    }
    Ok(())
}

/// Cut `s` at a drawn character boundary.
fn truncate(s: &mut String, u: &mut Unstructured) -> Result<()> {
    let cut = u.choose_index(s.len() + 1)?;
    let cut = (0..=cut)
        .rev()
        .find(|&c| s.is_char_boundary(c))
        .unwrap_or(0);
    s.truncate(cut);
    Ok(())
}

/// Reproducible input bytes for the brief random runs in the test suites (splitmix64;
/// 8 to 127 bytes), so they need no random-number dependency.
#[allow(dead_code)] // the fuzz targets include this file without calling it
pub fn seeded_input(state: &mut u64) -> Vec<u8> {
    let mut next = || {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let len = 8 + (next() % 120) as usize;
    (0..len).map(|_| next() as u8).collect()
}

/// A change that keeps the node's JSON type.
fn apply_same_type(node: &mut Value, u: &mut Unstructured) -> Result<()> {
    match node {
        Value::Number(n) => {
            *node = if u.arbitrary::<bool>()? {
                nudge(n, u)?
            } else {
                number(u)?
            }
        }
        Value::String(s) => {
            if u.arbitrary::<bool>()? {
                truncate(s, u)?;
            } else {
                *s = u.arbitrary::<String>()?;
            }
        }
        Value::Bool(b) => *b = !*b,
        Value::Array(a) if !a.is_empty() => match u.int_in_range(0u8..=2)? {
            0 => a.truncate(u.choose_index(a.len())?),
            1 => {
                let i = u.choose_index(a.len())?;
                let v = a[i].clone();
                a.push(v);
            }
            _ => {
                let (i, j) = (u.choose_index(a.len())?, u.choose_index(a.len())?);
                a.swap(i, j);
            }
        },
        Value::Object(m) if !m.is_empty() => {
            let i = u.choose_index(m.len())?;
            let key = m.keys().nth(i).cloned().expect("index below the length");
            m.remove(&key);
        }
        _ => *node = number(u)?,
    }
    Ok(())
}
