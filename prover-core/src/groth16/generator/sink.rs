//! Where generated points go, in file order: into memory, or straight into a parameter file.

use blstrs::{G1Affine, G2Affine};

use crate::error::Result;
use crate::groth16::encoding::{write_len, write_point_run};
use crate::groth16::params::VerifyingKey;

/// Receives the parameters in file order: the verifying key, then the sections h, l, a, b_g1
/// (G1) and b_g2 (G2), each announced with its length and then filled in chunks.
pub(super) trait Sink {
    fn vk(&mut self, vk: VerifyingKey) -> Result<()>;
    fn section(&mut self, what: &'static str, len: usize) -> Result<()>;
    fn g1(&mut self, what: &'static str, points: &[G1Affine]) -> Result<()>;
    fn g2(&mut self, what: &'static str, points: &[G2Affine]) -> Result<()>;
}

#[derive(Default)]
pub(super) struct MemorySink {
    pub vk: Option<VerifyingKey>,
    pub g1: Vec<Vec<G1Affine>>,
    pub g2: Vec<G2Affine>,
}

impl Sink for MemorySink {
    fn vk(&mut self, vk: VerifyingKey) -> Result<()> {
        self.vk = Some(vk);
        Ok(())
    }
    fn section(&mut self, what: &'static str, len: usize) -> Result<()> {
        if what == "params.b_g2" {
            self.g2.reserve_exact(len);
        } else {
            self.g1.push(Vec::with_capacity(len));
        }
        Ok(())
    }
    fn g1(&mut self, _: &'static str, points: &[G1Affine]) -> Result<()> {
        self.g1
            .last_mut()
            .expect("a section is open")
            .extend_from_slice(points);
        Ok(())
    }
    fn g2(&mut self, _: &'static str, points: &[G2Affine]) -> Result<()> {
        self.g2.extend_from_slice(points);
        Ok(())
    }
}

pub(super) struct FileSink<'a, W: std::io::Write> {
    pub w: &'a mut W,
    pub vk: Option<VerifyingKey>,
}

impl<W: std::io::Write> Sink for FileSink<'_, W> {
    fn vk(&mut self, vk: VerifyingKey) -> Result<()> {
        vk.write(&mut *self.w)?;
        self.vk = Some(vk);
        Ok(())
    }
    fn section(&mut self, what: &'static str, len: usize) -> Result<()> {
        write_len(self.w, what, len)
    }
    fn g1(&mut self, what: &'static str, points: &[G1Affine]) -> Result<()> {
        write_point_run(self.w, what, points)
    }
    fn g2(&mut self, what: &'static str, points: &[G2Affine]) -> Result<()> {
        write_point_run(self.w, what, points)
    }
}
