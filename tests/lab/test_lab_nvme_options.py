"""``iolab lab --nvme SIZE --sata SIZE`` on the host: qemu's NVMe controller over its own image behind its own PCIe
root port, then SATA SSDs on q35's AHCI ports, after the virtio disks."""
import pytest

from iolab.core.errors import IolabError
from iolab.lab import vm


def test_an_nvme_drive_follows_the_virtio_disks(tmp_path):
    config = vm.LabConfig(scratch="4G", disks=["64M"], nvme=["256M", "128M"], python_images=False)
    images = vm._make_disks(tmp_path, config)
    assert [p.stat().st_size for p in images] == [4 * 2**30, 64 * 2**20, 256 * 2**20, 128 * 2**20]
    options = " ".join(vm.vng_argv(config, images, tmp_path / "script.sh")).split()
    virtio = [w for w in options if w.startswith("virtio-blk-pci,") and "iolabpy" not in w]
    assert [w.split("serial=")[1] for w in virtio] == ["iolab-scratch", "iolab-disk1"]
    nvme = [w for w in options if w.startswith("nvme,")]
    assert nvme == ["nvme,serial=iolab-nvme1,drive=iolabnvme0,bus=iolabport0",
                    "nvme,serial=iolab-nvme2,drive=iolabnvme1,bus=iolabport1"]
    ports = [w for w in options if w.startswith("pcie-root-port,")]
    assert ports == [f"pcie-root-port,id=iolabport{i},bus=pcie.0,chassis={i + 1},x-speed=8,x-width=4" for i in (0, 1)]
    assert f"if=none,id=iolabnvme0,file={images[2]},format=raw,cache=none,aio=threads" in options
    assert "--qemu-opts=-machine q35 " in " ".join(options)  # the PCIe root ports and the AHCI controller are q35's


def test_sata_drives_follow_the_nvme_drives_on_the_ahci_ports(tmp_path):
    config = vm.LabConfig(scratch=None, disks=[], nvme=["64M"], sata=["256M", "128M"], python_images=False)
    images = vm._make_disks(tmp_path, config)
    assert [p.stat().st_size for p in images] == [64 * 2**20, 256 * 2**20, 128 * 2**20]
    options = " ".join(vm.vng_argv(config, images, tmp_path / "script.sh")).split()
    assert [w for w in options if w.startswith("nvme,")] == ["nvme,serial=iolab-nvme1,drive=iolabnvme0,bus=iolabport0"]
    sata = [w for w in options if w.startswith("ide-hd,")]
    assert sata == [f"ide-hd,drive=iolabsata{i},bus=ide.{i},serial=iolab-sata{i + 1},model=iolab-sata-ssd,rotation_rate=1"
                    for i in (0, 1)]
    assert f"if=none,id=iolabsata1,file={images[2]},format=raw,cache=none,aio=threads" in options


def test_more_sata_drives_than_ahci_ports_are_refused(tmp_path):
    config = vm.LabConfig(scratch=None, sata=["16M"] * 7, python_images=False)
    with pytest.raises(IolabError, match="has 6 ports"):
        vm.vng_argv(config, [tmp_path / f"d{i}.img" for i in range(7)], tmp_path / "script.sh")
