#
### GENERAL ###
Include /etc/ssh/sshd_config.d/*.conf
UsePAM yes
X11Forwarding yes
Subsystem sftp internal-sftp
#
### EXTRA CONFIG ###
LoginGraceTime 600
