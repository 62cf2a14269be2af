/* Mstcpip.h: the spelling some sources use for <mstcpip.h> (libndk WDK kit). */
#include <mstcpip.h>
