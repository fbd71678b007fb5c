//! The forged kernel's Volatility 3 ISF: the structure of the real JSONs in `shared/isf/`
//! (`metadata` {format, producer, windows.pdb {GUID, age, database, machine_type}},
//! `base_types`, `user_types`, `enums`, `symbols` {name: {address: RVA}}).

use serde_json::{json, Map, Value};

use super::consts::ArchFacts;
use super::isf_types::{BASE_TYPES, ENUMS, USER_TYPES};

/// The ISF text for a kernel with PDB `guid` ("5278AFF8-6C34-...", any case) and `age`.
/// `symbols`: (name, RVA) of every symbol; `af`: the machine type and, on ARM64, the `_KPRCB`
/// size (the subset of fields keeps the forged kernel's offsets, which the dump follows).
pub(crate) fn isf_json(
    guid: &str,
    age: u32,
    symbols_in: &[(&'static str, u64)],
    af: &ArchFacts,
) -> String {
    let guid_key: String = guid
        .chars()
        .filter(|c| c.is_ascii_hexdigit())
        .collect::<String>()
        .to_uppercase();
    let parse = |s: &str| -> Value { serde_json::from_str(s).expect("embedded ISF JSON") };
    let mut symbols = Map::new();
    for (name, rva) in symbols_in {
        symbols.insert((*name).to_string(), json!({ "address": rva }));
    }
    let v = json!({
        "metadata": {
            "format": "6.1.0",
            "producer": {
                "name": "etwdump-forge",
                "version": env!("CARGO_PKG_VERSION"),
                "datetime": "2024-01-01T00:00:00"
            },
            "windows": {
                "pdb": {
                    "GUID": guid_key,
                    "age": age,
                    "database": "ntkrnlmp.pdb",
                    "machine_type": af.isf_machine_type
                }
            }
        },
        "base_types": parse(BASE_TYPES),
        "user_types": user_types(parse(USER_TYPES), af),
        "enums": parse(ENUMS),
        "symbols": Value::Object(symbols),
    });
    serde_json::to_string_pretty(&v).expect("ISF serialises")
}

/// USER_TYPES with `_KPRCB.size` = the architecture's KPRCB size.
fn user_types(mut v: Value, af: &ArchFacts) -> Value {
    if let Some(size) = v.pointer_mut("/_KPRCB/size") {
        *size = json!(af.kprcb_size);
    }
    v
}
