//! Resource versions: what `If-Match` and `ETag` carry, opaque to everyone but the store.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The version of a stored function, trigger or job, changed by every spec change. Opaque:
/// compare two for equality, never order or parse them (the SQL store counts 1, 2, …;
/// Kubernetes gives `metadata.resourceVersion`, which is a string with no promised shape).
///
/// JSON: a number when the version is all digits (as the SQL store's always are, so the API
/// keeps answering `"resource_version": 7`), a string otherwise; either is read back.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceVersion(String);

impl ResourceVersion {
    /// A version with this exact text. Errors: `None` for an empty text.
    pub fn new(text: impl Into<String>) -> Option<Self> {
        let text = text.into();
        (!text.is_empty()).then_some(ResourceVersion(text))
    }

    /// The version a store that counts its changes gives at `count` (1 for a new resource).
    pub fn from_count(count: u64) -> Self {
        ResourceVersion(count.to_string())
    }

    /// The count, for a store that counts its changes; `None` for a version it did not give.
    pub fn as_count(&self) -> Option<u64> {
        // Only the text `from_count` writes: no sign, no leading zeros (`007` stays a string).
        self.0.parse().ok().filter(|n: &u64| n.to_string() == self.0)
    }

    /// The version's text, as `ETag` shows it between quotes.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ResourceVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for ResourceVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.as_count() {
            Some(n) => serializer.serialize_u64(n),
            None => serializer.serialize_str(&self.0),
        }
    }
}

impl<'de> Deserialize<'de> for ResourceVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Through `Value`, which reads numbers whatever serde_json's number features are.
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Number(n) => n
                .as_u64()
                .map(ResourceVersion::from_count)
                .ok_or_else(|| serde::de::Error::custom("resource_version must be a whole number or a string")),
            serde_json::Value::String(s) => {
                ResourceVersion::new(s).ok_or_else(|| serde::de::Error::custom("resource_version is empty"))
            }
            _ => Err(serde::de::Error::custom("resource_version must be a whole number or a string")),
        }
    }
}

/// In the OpenAPI document: a whole number or a non-empty string (see the type's doc).
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for ResourceVersion {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        OneOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Integer))
            .item(ObjectBuilder::new().schema_type(Type::String))
            .description(Some(
                "Opaque version of the resource, changed by every spec change; send it back in If-Match.",
            ))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for ResourceVersion {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_numbers_in_json_and_other_versions_strings() {
        assert_eq!(serde_json::to_string(&ResourceVersion::from_count(7)).unwrap(), "7");
        let opaque = ResourceVersion::new("a7f-3").unwrap();
        assert_eq!(serde_json::to_string(&opaque).unwrap(), "\"a7f-3\"");
        assert_eq!(opaque.as_count(), None);
        for text in ["7", "\"7\""] {
            let back: ResourceVersion = serde_json::from_str(text).unwrap();
            assert_eq!(back, ResourceVersion::from_count(7));
        }
        assert_eq!(serde_json::from_str::<ResourceVersion>("\"a7f-3\"").unwrap(), opaque);
        assert!(serde_json::from_str::<ResourceVersion>("\"\"").is_err());
        assert_eq!(ResourceVersion::new("+7").unwrap().as_count(), None, "only plain digits are counts");
        let padded = ResourceVersion::new("007").unwrap();
        assert_eq!(padded.as_count(), None, "leading zeros are not a count");
        let back: ResourceVersion = serde_json::from_str(&serde_json::to_string(&padded).unwrap()).unwrap();
        assert_eq!(back, padded, "and round-trip as a string");
    }
}
