//! How the BPF ABI structs (the types libbpf-cargo generated from the object's BTF, or Rust
//! mirrors of them) are held to the C definitions and turned into map keys and values:
//! [`assert_layout!`] checks sizes and offsets at compile time against the header's numbers
//! and the BTF-generated type; [`impl_bytes!`] gives a padding-free `#[repr(C)]` struct its
//! native-endian bytes and back; [`impl_bytes_eq!`] gives a generated type equality and
//! hashing. Used by every tool's `abi` module.

/// Asserts size, every field offset and field size against the expected
/// numbers from the ABI headers, plus "no padding" (the field sizes add up to
/// the struct size; together with the same check on every nested struct this
/// makes `as_bytes` sound), and compares with the BTF-generated type of the
/// same name.
macro_rules! assert_layout {
    ($ty:ty, $btf:ty, $size:expr, { $($field:ident: $fty:ty = $off:expr),+ $(,)? }) => {
        const _: () = {
            assert!(::core::mem::size_of::<$ty>() == $size);
            assert!(::core::mem::size_of::<$btf>() == $size);
            $(
                assert!(::core::mem::offset_of!($ty, $field) == $off);
                assert!(::core::mem::offset_of!($btf, $field) == $off);
                assert!(::core::mem::size_of::<$fty>() == $crate::layout::size_of_field(|s: &$ty| &s.$field));
            )+
            assert!(0 $(+ ::core::mem::size_of::<$fty>())+ == $size);
        };
    };
}

/// Size of a field, given a projection (lets the macro check declared types).
pub(crate) const fn size_of_field<S, F>(_: fn(&S) -> &F) -> usize {
    size_of::<F>()
}

/// `N` bytes at `off`, or `None` if out of range.
pub(crate) fn field<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..off.checked_add(N)?)?.try_into().ok()
}

/// The ABI structs, for parsing nested struct fields generically.
pub(crate) trait AbiStruct: Copy + Default {
    const SIZE: usize;
    fn parse(bytes: &[u8]) -> Option<Self>;
}

/// The struct `T` at `off`, or `None` if out of range.
pub(crate) fn read_struct<T: AbiStruct>(b: &[u8], off: usize) -> Option<T> {
    T::parse(b.get(off..off.checked_add(T::SIZE)?)?)
}

/// `N` consecutive structs `T` starting at `off`, or `None` if out of range.
pub(crate) fn read_array<T: AbiStruct, const N: usize>(b: &[u8], off: usize) -> Option<[T; N]> {
    let mut out = [T::default(); N];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = read_struct(b, off.checked_add(i.checked_mul(T::SIZE)?)?)?;
    }
    Some(out)
}

pub(crate) fn read_u32s<const N: usize>(b: &[u8], off: usize) -> Option<[u32; N]> {
    let mut out = [0u32; N];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = u32::from_ne_bytes(field(b, off.checked_add(i.checked_mul(4)?)?)?);
    }
    Some(out)
}

pub(crate) fn read_i32s<const N: usize>(b: &[u8], off: usize) -> Option<[i32; N]> {
    let mut out = [0i32; N];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = i32::from_ne_bytes(field(b, off.checked_add(i.checked_mul(4)?)?)?);
    }
    Some(out)
}

/// Implements `SIZE`, `as_bytes` and `from_bytes` for a padding-free
/// `#[repr(C)]` struct whose fields are integers (`u32`, ...), byte arrays
/// (`bytes`), other ABI structs (`struct`) or arrays of them (`array`).
macro_rules! impl_bytes {
    ($ty:ident { $($field:ident: $kind:tt),+ $(,)? }) => {
        impl $ty {
            /// Size in bytes (the BPF map key/value size).
            pub const SIZE: usize = ::core::mem::size_of::<$ty>();

            /// The in-memory (native endian) representation, as BPF sees it.
            pub fn as_bytes(&self) -> &[u8] {
                // SAFETY: `Self` is `#[repr(C)]`, consists only of integer
                // and byte-array fields and of ABI structs (or arrays of them)
                // built the same way, and neither it nor any nested struct
                // has padding (checked by `assert_layout!`), so all `SIZE`
                // bytes are initialised and any alignment is fine for `u8`.
                // The slice borrows `self`.
                unsafe { core::slice::from_raw_parts((self as *const Self).cast::<u8>(), Self::SIZE) }
            }

            /// Parses the native-endian representation; `None` unless
            /// `bytes.len() == SIZE`.
            pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
                if bytes.len() != Self::SIZE {
                    return None;
                }
                Some(Self {
                    $($field: impl_bytes!(@read $kind, bytes, ::core::mem::offset_of!($ty, $field)),)+
                })
            }
        }

        impl $crate::layout::AbiStruct for $ty {
            const SIZE: usize = <$ty>::SIZE;
            fn parse(bytes: &[u8]) -> Option<Self> {
                <$ty>::from_bytes(bytes)
            }
        }
    };
    (@read bytes, $b:expr, $off:expr) => { $crate::layout::field($b, $off)? };
    (@read struct, $b:expr, $off:expr) => { $crate::layout::read_struct($b, $off)? };
    (@read array, $b:expr, $off:expr) => { $crate::layout::read_array($b, $off)? };
    (@read i32s, $b:expr, $off:expr) => { $crate::layout::read_i32s($b, $off)? };
    (@read u32s, $b:expr, $off:expr) => { $crate::layout::read_u32s($b, $off)? };
    (@read $int:ty, $b:expr, $off:expr) => { <$int>::from_ne_bytes($crate::layout::field($b, $off)?) };
}

/// Implements `PartialEq`, `Eq` and `Hash` by the bytes ([`impl_bytes!`]'s `as_bytes`) for
/// ABI structs whose types libbpf-cargo generated from BTF (it derives only `Debug`,
/// `Default`, `Copy` and `Clone`). The structs have no padding and only integer fields, so
/// equal bytes are equal fields.
macro_rules! impl_bytes_eq {
    ($($ty:ty),+ $(,)?) => {$(
        impl PartialEq for $ty {
            fn eq(&self, other: &Self) -> bool {
                self.as_bytes() == other.as_bytes()
            }
        }
        impl Eq for $ty {}
        impl ::core::hash::Hash for $ty {
            fn hash<H: ::core::hash::Hasher>(&self, state: &mut H) {
                self.as_bytes().hash(state);
            }
        }
    )+};
}

pub(crate) use assert_layout;
pub(crate) use impl_bytes;
pub(crate) use impl_bytes_eq;
