//! Checkpoints in the [safetensors](https://huggingface.co/docs/safetensors) format: the named
//! parameters of a model, written and read the way PyTorch's `safetensors.torch.save_file` /
//! `load_file` do, so a checkpoint moves between this crate and PyTorch in both directions
//! (a model's names are its [`crate::Module::named_parameters`]; name them as the other side
//! does, e.g. nanoGPT's `transformer.h.0.attn.c_attn.weight`).
//!
//! The format: an 8-byte little-endian header length, a JSON header (each name's dtype, shape
//! and byte range), then the tensors' bytes, row-major and little-endian. f32, f64, f16, bf16,
//! i32 and i64 tensors are read and written; a file holding another dtype (`BOOL`, `U8`, …) is
//! an error naming the tensor.
//!
//! [`HostTensor`], [`encode`] and [`decode`] work on the host alone; [`save`] copies each value
//! to the host first and [`Checkpoint::load_into`] copies each tensor to the device after.

use crate::error::{NnError, Result};
use crate::Var;
use cuda_stack_runtime::cuda_stack_driver::float8::{F8E4M3, F8E5M2};
use cuda_stack_runtime::cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::{DType, GradElement, Tensor, TensorElement};
use safetensors::tensor::{SafeTensors, TensorView};
use safetensors::Dtype;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One tensor of a checkpoint on the host: its dtype, shape and row-major little-endian bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostTensor {
    /// The element type.
    pub dtype: DType,
    /// The shape (`[]` for a scalar).
    pub shape: Vec<usize>,
    /// `shape.iter().product() · dtype.size()` bytes, row-major, little-endian.
    pub bytes: Vec<u8>,
}

impl HostTensor {
    /// The host copy of `t` (one device-to-host copy).
    pub fn from_tensor<T: TensorElement>(t: &Tensor<T>) -> Result<HostTensor> {
        let v = t.to_vec()?;
        Ok(HostTensor {
            dtype: T::DTYPE,
            shape: t.shape().to_vec(),
            bytes: bytemuck::cast_slice(&v).to_vec(),
        })
    }

    /// A device tensor of this dtype (which must be `T`'s: see [`HostTensor::to_tensor_as`]
    /// for a conversion).
    pub fn to_tensor<T: TensorElement>(&self, name: &str) -> Result<Tensor<T>> {
        if self.dtype != T::DTYPE {
            return Err(problem(format!(
                "tensor `{name}` is {:?} in the checkpoint, not {:?}; use to_tensor_as to \
                 convert",
                self.dtype,
                T::DTYPE
            )));
        }
        let n: usize = self.shape.iter().product();
        if self.bytes.len() != n * T::DTYPE.size() {
            return Err(problem(format!(
                "tensor `{name}`: {} bytes for shape {:?} of {:?}",
                self.bytes.len(),
                self.shape,
                self.dtype
            )));
        }
        Ok(Tensor::from_vec(elements::<T>(&self.bytes), &self.shape)?)
    }

    /// A device tensor of `T`, converted on the device from the stored dtype (rounded once
    /// when narrowing, as `tensor.to(dtype)`).
    pub fn to_tensor_as<T: TensorElement>(&self, name: &str) -> Result<Tensor<T>> {
        Ok(match self.dtype {
            DType::F32 => self.to_tensor::<f32>(name)?.to_dtype::<T>()?,
            DType::F64 => self.to_tensor::<f64>(name)?.to_dtype::<T>()?,
            DType::F16 => self.to_tensor::<f16>(name)?.to_dtype::<T>()?,
            DType::BF16 => self.to_tensor::<bf16>(name)?.to_dtype::<T>()?,
            DType::I32 => self.to_tensor::<i32>(name)?.to_dtype::<T>()?,
            DType::I64 => self.to_tensor::<i64>(name)?.to_dtype::<T>()?,
            // FP8 is stored unscaled here; loading it as FP8 needs no cast, and to a wide type
            // `to_dtype` says that FP8 converts only with a scale (Tensor::from_fp8).
            DType::F8E4M3 => self.to_tensor::<F8E4M3>(name)?.to_dtype::<T>()?,
            DType::F8E5M2 => self.to_tensor::<F8E5M2>(name)?.to_dtype::<T>()?,
        })
    }
}

/// `bytes` (a whole number of `T`s, little-endian) as `T`s, whatever their alignment.
fn elements<T: bytemuck::Pod>(bytes: &[u8]) -> Vec<T> {
    let n = bytes.len() / std::mem::size_of::<T>();
    let mut v = vec![T::zeroed(); n];
    bytemuck::cast_slice_mut::<T, u8>(&mut v)
        .copy_from_slice(&bytes[..n * std::mem::size_of::<T>()]);
    v
}

fn problem(problem: String) -> NnError {
    NnError::Invalid {
        what: "checkpoint",
        problem,
    }
}

fn file_problem(path: &Path, what: impl std::fmt::Display) -> NnError {
    problem(format!("{}: {what}", path.display()))
}

fn to_format(d: DType) -> Dtype {
    match d {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::F8E4M3 => Dtype::F8_E4M3,
        DType::F8E5M2 => Dtype::F8_E5M2,
    }
}

fn from_format(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::F8_E4M3 => DType::F8E4M3,
        Dtype::F8_E5M2 => DType::F8E5M2,
        _ => return None,
    })
}

/// The file's bytes for `tensors` (names must be unique) and optional string `metadata`
/// (the header's `__metadata__`).
pub fn encode(
    tensors: &[(String, HostTensor)],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<Vec<u8>> {
    let mut views = BTreeMap::new();
    for (name, t) in tensors {
        let view = TensorView::new(to_format(t.dtype), t.shape.clone(), &t.bytes)
            .map_err(|e| problem(format!("tensor `{name}`: {e:?}")))?;
        if views.insert(name.clone(), view).is_some() {
            return Err(problem(format!("the name `{name}` is given twice")));
        }
    }
    let info = metadata.map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
    safetensors::serialize(views, &info).map_err(|e| problem(format!("encoding: {e:?}")))
}

/// The tensors of a file's `bytes`, by name, and its `__metadata__` (empty when absent).
pub fn decode(bytes: &[u8]) -> Result<(BTreeMap<String, HostTensor>, BTreeMap<String, String>)> {
    let st = SafeTensors::deserialize(bytes)
        .map_err(|e| problem(format!("not a safetensors file: {e:?}")))?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        let dtype = from_format(view.dtype()).ok_or_else(|| {
            problem(format!(
                "tensor `{name}` is {:?}: this crate reads F32, F64, F16, BF16, I32 and I64",
                view.dtype()
            ))
        })?;
        out.insert(
            name,
            HostTensor {
                dtype,
                shape: view.shape().to_vec(),
                bytes: view.data().to_vec(),
            },
        );
    }
    let (_, header) = SafeTensors::read_metadata(bytes)
        .map_err(|e| problem(format!("not a safetensors file: {e:?}")))?;
    let meta = header
        .metadata()
        .clone()
        .map(|m| m.into_iter().collect())
        .unwrap_or_default();
    Ok((out, meta))
}

/// Writes `named` (e.g. a module's [`crate::Module::named_parameters`]) to `path` in the
/// safetensors format, with `metadata` in the header. Each value is copied to the host once.
/// The file is written under a temporary name in the same folder, flushed, and renamed to
/// `path`: a reader (or a crash) sees the old file or the whole new one, never a part, and an
/// error leaves nothing behind.
pub fn save<T: GradElement>(
    path: impl AsRef<Path>,
    named: &[(String, Var<T>)],
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<()> {
    let path = path.as_ref();
    let host: Vec<(String, HostTensor)> = named
        .iter()
        .map(|(n, v)| Ok((n.clone(), HostTensor::from_tensor(&v.value())?)))
        .collect::<Result<_>>()?;
    let bytes = encode(&host, metadata)?;
    write_atomically(path, &bytes)
}

/// Writes `bytes` to `path` through a temporary file beside it (a hidden name with the process
/// id and a counter), flushed to the disk and then renamed over `path`; the temporary file is
/// removed after an error.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| file_problem(path, "has no file name to write"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        // Best effort: the temporary file may not exist (the create failed).
        let _ = std::fs::remove_file(&tmp);
        file_problem(path, format!("writing: {e}"))
    })
}

/// A checkpoint read from a file: its tensors on the host, by name.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    path: PathBuf,
    tensors: BTreeMap<String, HostTensor>,
    metadata: BTreeMap<String, String>,
}

impl Checkpoint {
    /// Reads `path` (the whole file, onto the host).
    pub fn open(path: impl AsRef<Path>) -> Result<Checkpoint> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| file_problem(path, format!("reading: {e}")))?;
        let (tensors, metadata) = decode(&bytes).map_err(|e| file_problem(path, e))?;
        Ok(Checkpoint {
            path: path.to_path_buf(),
            tensors,
            metadata,
        })
    }

    /// The tensors' names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tensors.keys().map(String::as_str).collect()
    }

    /// The header's `__metadata__`.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// The host tensor `name`.
    pub fn get(&self, name: &str) -> Result<&HostTensor> {
        self.tensors
            .get(name)
            .ok_or_else(|| file_problem(&self.path, format!("has no tensor named `{name}`")))
    }

    /// The tensor `name` on the device as `T`, converted from its stored dtype.
    pub fn tensor<T: TensorElement>(&self, name: &str) -> Result<Tensor<T>> {
        self.get(name)?.to_tensor_as::<T>(name)
    }

    /// Copies the checkpoint into `named` (`load_state_dict(strict=True)`): every name must be
    /// in the file with the variable's shape, and the file must hold no other tensor; values
    /// are converted from the stored dtype. Nothing is copied unless everything matches; the
    /// error lists every missing, unexpected or mis-shaped name.
    pub fn load_into<T: GradElement>(&self, named: &[(String, Var<T>)]) -> Result<()> {
        let mut wrong = Vec::new();
        for (n, v) in named {
            match self.tensors.get(n) {
                None => wrong.push(format!("missing `{n}`")),
                Some(t) if t.shape != v.shape() => wrong.push(format!(
                    "`{n}` is {:?} in the file, {:?} in the model",
                    t.shape,
                    v.shape()
                )),
                Some(_) => {}
            }
        }
        for n in self.tensors.keys() {
            if !named.iter().any(|(m, _)| m == n) {
                wrong.push(format!("unexpected `{n}`"));
            }
        }
        if !wrong.is_empty() {
            return Err(file_problem(
                &self.path,
                format!("does not match the model: {}", wrong.join(", ")),
            ));
        }
        for (n, v) in named {
            v.copy_from_(&self.tensor::<T>(n)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(dtype: DType, shape: &[usize], bytes: Vec<u8>) -> HostTensor {
        HostTensor {
            dtype,
            shape: shape.to_vec(),
            bytes,
        }
    }

    #[test]
    fn round_trips_every_dtype_and_metadata() {
        let f: Vec<f32> = vec![1.0, -2.5, 3.25, 0.0, 7.0, -0.125];
        let b: Vec<bf16> = f.iter().map(|&x| bf16::from_f32(x)).collect();
        let i: Vec<i64> = vec![1, -2, 3];
        let tensors = vec![
            (
                "h.0.w".to_string(),
                host(DType::F32, &[2, 3], bytemuck::cast_slice(&f).to_vec()),
            ),
            (
                "a.bf".to_string(),
                host(DType::BF16, &[6], bytemuck::cast_slice(&b).to_vec()),
            ),
            (
                "ids".to_string(),
                host(DType::I64, &[3], bytemuck::cast_slice(&i).to_vec()),
            ),
            (
                "scalar".to_string(),
                host(DType::F64, &[], 2.0f64.to_le_bytes().to_vec()),
            ),
        ];
        let mut meta = BTreeMap::new();
        meta.insert("format".to_string(), "pt".to_string());
        let bytes = encode(&tensors, Some(&meta)).unwrap();
        // The layout: an 8-byte little-endian header length, then JSON.
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header = std::str::from_utf8(&bytes[8..8 + n]).unwrap();
        assert!(
            header.contains("\"h.0.w\"") && header.contains("\"BF16\""),
            "{header}"
        );
        let (back, m) = decode(&bytes).unwrap();
        assert_eq!(m, meta);
        for (name, t) in &tensors {
            assert_eq!(&back[name], t, "{name}");
        }
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        // A byte count that does not match the shape.
        let t = vec![("x".to_string(), host(DType::F32, &[3], vec![0; 8]))];
        assert!(encode(&t, None).is_err());
        // The same name twice.
        let t = vec![
            ("x".to_string(), host(DType::F32, &[1], vec![0; 4])),
            ("x".to_string(), host(DType::F32, &[1], vec![0; 4])),
        ];
        assert!(encode(&t, None).unwrap_err().to_string().contains("twice"));
        // Not a file of this format, truncated, or a header that overruns the file.
        assert!(decode(b"not a checkpoint").is_err());
        assert!(decode(&[]).is_err());
        assert!(decode(&u64::MAX.to_le_bytes()).is_err());
        let good = encode(
            &[("x".to_string(), host(DType::F32, &[2], vec![0; 8]))],
            None,
        )
        .unwrap();
        assert!(decode(&good[..good.len() - 1]).is_err());
        // A dtype this crate does not hold.
        let raw = r#"{"b":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}}"#;
        let mut file = (raw.len() as u64).to_le_bytes().to_vec();
        file.extend(raw.as_bytes());
        file.extend([1u8, 0]);
        let e = decode(&file).unwrap_err().to_string();
        assert!(e.contains("`b`") && e.contains("BOOL"), "{e}");
    }

    /// The files in `dir`, sorted.
    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn files_are_written_whole_through_a_temporary_name() {
        let dir = std::env::temp_dir().join(format!("ckpt-atomic-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("model.safetensors");
        write_atomically(&file, b"first").unwrap();
        write_atomically(&file, b"second, longer").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"second, longer");
        assert_eq!(listing(&dir), ["model.safetensors"]);
        // A folder in the way: an error naming the path, the old state kept, no stray file.
        std::fs::create_dir(dir.join("taken")).unwrap();
        let e = write_atomically(&dir.join("taken"), b"x").unwrap_err();
        assert!(e.to_string().contains("taken"), "{e}");
        assert_eq!(listing(&dir), ["model.safetensors", "taken"]);
        // A missing folder: an error, nothing made.
        assert!(write_atomically(&dir.join("no/such/dir/f"), b"x").is_err());
        assert_eq!(listing(&dir), ["model.safetensors", "taken"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reads_a_file_written_by_python_safetensors() {
        // The bytes of `safetensors.numpy.save({"w": np.array([[1, 2], [3, 4]], np.float32),
        // "b": np.array([0.5], np.float16)})` (safetensors 0.4.5).
        let header = r#"{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"F16","shape":[1],"data_offsets":[16,18]}}"#;
        assert_eq!(header.len(), 112);
        let mut file = 112u64.to_le_bytes().to_vec();
        file.extend(header.as_bytes());
        let data = "0000803f0000004000004040000080400038";
        file.extend(
            (0..data.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&data[i..i + 2], 16).unwrap()),
        );
        let (t, meta) = decode(&file).unwrap();
        assert!(meta.is_empty());
        assert_eq!(t["w"].shape, [2, 2]);
        let w: Vec<f32> = elements(&t["w"].bytes);
        assert_eq!(w, [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(t["b"].dtype, DType::F16);
        assert_eq!(t["b"].bytes, f16::from_f32(0.5).to_le_bytes());
        // And ours re-encodes the same tensors to a file Python reads the same way: the same
        // header entries (sorted by dtype size, then name, as the format's writers do).
        let again = encode(
            &[
                ("w".to_string(), t["w"].clone()),
                ("b".to_string(), t["b"].clone()),
            ],
            None,
        )
        .unwrap();
        assert_eq!(decode(&again).unwrap().0, t);
    }
}
