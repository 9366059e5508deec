"""``iolab lab --nvme SIZE`` on the host: qemu's NVMe controller over its own image, after the virtio disks."""
from iolab.lab import vm


def test_an_nvme_drive_follows_the_virtio_disks(tmp_path):
    config = vm.LabConfig(scratch="4G", disks=["64M"], nvme=["256M", "128M"], python_images=False)
    images = vm._make_disks(tmp_path, config)
    assert [p.stat().st_size for p in images] == [4 * 2**30, 64 * 2**20, 256 * 2**20, 128 * 2**20]
    options = " ".join(vm.vng_argv(config, images, tmp_path / "script.sh")).split()
    virtio = [w for w in options if w.startswith("virtio-blk-pci,") and "iolabpy" not in w]
    assert [w.split("serial=")[1] for w in virtio] == ["iolab-scratch", "iolab-disk1"]
    nvme = [w for w in options if w.startswith("nvme,")]
    assert nvme == ["nvme,serial=iolab-nvme1,drive=iolabnvme0", "nvme,serial=iolab-nvme2,drive=iolabnvme1"]
    assert f"if=none,id=iolabnvme0,file={images[2]},format=raw,cache=none,aio=threads" in options
