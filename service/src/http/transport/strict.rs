//! A deserializer adapter under which a struct accepts only a JSON object.
//!
//! serde_json also reads a struct from an array of its field values in
//! order (`["user:1", null, ["w1"]]` for `{key, context, candidates}`), which
//! slips past `deny_unknown_fields` and is never what a client of this API
//! means. [`Strict`] wraps a deserializer, and every nested one it hands out,
//! so that a struct at any depth is read from a JSON object only; anything
//! else is refused naming the fields that were expected.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, Visitor};

/// `D` with structs restricted to JSON objects at every depth.
pub struct Strict<D>(pub D);

struct Wrap<V>(V);

/// The visitor of a struct: a map goes through, anything else is refused.
struct StructOnly<V> {
    visitor: V,
    fields: &'static [&'static str],
}

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, Self::Error> {
                self.0.$method($($arg,)* Wrap(visitor))
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any(); deserialize_bool(); deserialize_i8(); deserialize_i16();
        deserialize_i32(); deserialize_i64(); deserialize_i128(); deserialize_u8();
        deserialize_u16(); deserialize_u32(); deserialize_u64(); deserialize_u128();
        deserialize_f32(); deserialize_f64(); deserialize_char(); deserialize_str();
        deserialize_string(); deserialize_bytes(); deserialize_byte_buf();
        deserialize_option(); deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq(); deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map(); deserialize_identifier(); deserialize_ignored_any();
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_any(StructOnly { visitor, fields })
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Wrap<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Strict(d))
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty);)*) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
                self.0.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)
    }

    forward_visit! {
        visit_bool(bool); visit_i8(i8); visit_i16(i16); visit_i32(i32); visit_i64(i64);
        visit_i128(i128); visit_u8(u8); visit_u16(u16); visit_u32(u32); visit_u64(u64);
        visit_u128(u128); visit_f32(f32); visit_f64(f64); visit_char(char);
        visit_str(&str); visit_borrowed_str(&'de str); visit_string(String);
        visit_bytes(&[u8]); visit_borrowed_bytes(&'de [u8]); visit_byte_buf(Vec<u8>);
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.visit_some(Strict(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.visit_newtype_struct(Strict(d))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.visit_seq(Wrap(seq))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(Wrap(map))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.0.visit_enum(Wrap(data))
    }
}

impl<'de, A: de::SeqAccess<'de>> de::SeqAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Wrap(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: de::MapAccess<'de>> de::MapAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Wrap(seed))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Wrap(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: de::EnumAccess<'de>> de::EnumAccess<'de> for Wrap<A> {
    type Error = A::Error;
    type Variant = Wrap<A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self::Variant), A::Error> {
        self.0
            .variant_seed(Wrap(seed))
            .map(|(v, variant)| (v, Wrap(variant)))
    }
}

impl<'de, A: de::VariantAccess<'de>> de::VariantAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Wrap(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Wrap(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0
            .struct_variant(fields, StructOnly { visitor, fields })
    }
}

impl<V> StructOnly<V> {
    fn refuse<E: de::Error>(&self, got: &str) -> E {
        E::custom(format_args!(
            "expected {}, got {got}",
            Expected(self.fields)
        ))
    }
}

struct Expected(&'static [&'static str]);

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")?;
        for (i, name) in self.0.iter().enumerate() {
            f.write_str(if i == 0 { " with fields `" } else { "`, `" })?;
            f.write_str(name)?;
        }
        if !self.0.is_empty() {
            f.write_str("`")?;
        }
        Ok(())
    }
}

impl<'de, V: Visitor<'de>> Visitor<'de> for StructOnly<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Expected(self.fields), f)
    }

    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.visitor.visit_map(Wrap(map))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, _seq: A) -> Result<Self::Value, A::Error> {
        Err(self.refuse("an array"))
    }

    fn visit_bool<E: de::Error>(self, _v: bool) -> Result<Self::Value, E> {
        Err(self.refuse("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _v: i64) -> Result<Self::Value, E> {
        Err(self.refuse("a number"))
    }

    fn visit_u64<E: de::Error>(self, _v: u64) -> Result<Self::Value, E> {
        Err(self.refuse("a number"))
    }

    fn visit_f64<E: de::Error>(self, _v: f64) -> Result<Self::Value, E> {
        Err(self.refuse("a number"))
    }

    fn visit_str<E: de::Error>(self, _v: &str) -> Result<Self::Value, E> {
        Err(self.refuse("a string"))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(self.refuse("null"))
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::Strict;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        a: u32,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        name: String,
        inner: Option<Inner>,
        list: Vec<Inner>,
    }

    fn strict(json: &str) -> Result<Outer, String> {
        let de = &mut serde_json::Deserializer::from_str(json);
        serde_path_to_error::deserialize(Strict(&mut *de)).map_err(|e| e.to_string())
    }

    #[test]
    fn objects_at_every_depth_pass() {
        let v = strict(r#"{"name":"x","inner":{"a":1},"list":[{"a":2}]}"#).expect("object");
        assert_eq!(v.inner, Some(Inner { a: 1 }));
        assert_eq!(v.list, vec![Inner { a: 2 }]);
        assert!(strict(r#"{"name":"x","inner":null,"list":[]}"#).is_ok());
    }

    #[test]
    fn arrays_for_structs_are_refused_at_every_depth() {
        // Plain serde_json takes all three.
        for json in [
            r#"["x", null, []]"#,
            r#"{"name":"x","inner":[1],"list":[]}"#,
        ] {
            assert!(serde_json::from_str::<Outer>(json).is_ok(), "{json}");
        }
        let top = strict(r#"["x", null, []]"#).unwrap_err();
        assert!(
            top.starts_with(
                "expected a JSON object with fields `name`, `inner`, `list`, got an array"
            ),
            "{top}"
        );
        let nested = strict(r#"{"name":"x","inner":[1],"list":[]}"#).unwrap_err();
        assert!(
            nested.starts_with("inner: expected a JSON object with fields `a`, got an array"),
            "{nested}"
        );
        let listed = strict(r#"{"name":"x","inner":null,"list":[[2]]}"#).unwrap_err();
        assert!(
            listed.starts_with("list[0]: expected a JSON object"),
            "{listed}"
        );
        let scalar = strict(r#"{"name":"x","inner":7,"list":[]}"#).unwrap_err();
        assert!(scalar.contains("got a number"), "{scalar}");
    }
}
