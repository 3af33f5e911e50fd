GET javascript:alert(1) HTTP/1.1
Host: a

