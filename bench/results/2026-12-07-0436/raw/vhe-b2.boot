PASS vhe mode-line kvm [1]: VHE mode initialized successfully
PASS vhe b_2M_w100_1_mp_f0_wp1_c1
PASS vhe b_2M_w10_1_mp_f0_wp1_c1
PASS vhe b_2M_w10_2_mp_f0_wp1_c1
PASS vhe b_2M_w100_2_mp_f0_wp1_c1
PASS vhe b_0_w10_1_mp_f0_wp1_c1
PASS vhe serial-log clean (16s)
