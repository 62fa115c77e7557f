"""The torch side of spyre-emu (``spyre_emu.frontend``): the only code that imports torch.

The torch.compile backend is built in its own issue; the simulator never imports this package.
"""
