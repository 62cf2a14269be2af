/* ws2ipdef.h (libndk WDK kit): see ndkwdk/ws2.h. */
#ifndef NDKWDK_WS2IPDEF_H
#define NDKWDK_WS2IPDEF_H
#include <ndkwdk/ws2.h>
#endif
