// SPDX-License-Identifier: MIT
// jwtcheck: checks, with nothing but the .NET framework, that a public key and token made by
// dotmon's auth_generate are the standard JOSE objects dotnet-monitor's generatekey makes:
//   * the key is a base64url JSON Web Key {"kty":"EC","crv":"P-384","x","y"} whose coordinates
//     import as ECParameters on nistP384;
//   * the token is a compact JWS with header {"alg":"ES384","typ":"JWT"} whose IEEE P1363
//     (R || S) signature verifies with that key under SHA-384;
//   * the claims carry aud, iss, sub and a numeric exp in the future.
// Usage: jwtcheck <publicKeyB64url> <subject> <token> [issuer]
// Exit 0 and "OK" on success; exit 1 and "FAIL: why" otherwise.
using System;
using System.Linq;
using System.Security.Cryptography;
using System.Text;
using System.Text.Json;

internal static class Program
{
    private const string Audience = "https://github.com/dotnet/dotnet-monitor";
    private const string DefaultIssuer = "https://github.com/dotnet/dotnet-monitor/generatekey+MonitorApiKey";

    private sealed class CheckException : Exception
    {
        public CheckException(string message) : base(message) { }
    }

    private static void Require(bool condition, string why)
    {
        if (!condition)
        {
            throw new CheckException(why);
        }
    }

    // RFC 7515 section 2: base64url without padding. Reject padding and the standard alphabet.
    private static byte[] Base64UrlDecode(string s, string what)
    {
        Require(s.Length % 4 != 1 && s.All(c => char.IsAsciiLetterOrDigit(c) || c == '-' || c == '_'),
                $"{what} is not unpadded base64url");
        string b64 = s.Replace('-', '+').Replace('_', '/');
        b64 += new string('=', (4 - b64.Length % 4) % 4);
        return Convert.FromBase64String(b64);
    }

    private static string[] Names(JsonElement obj) =>
        obj.EnumerateObject().Select(p => p.Name).ToArray();

    private static string GetString(JsonElement obj, string name)
    {
        Require(obj.TryGetProperty(name, out JsonElement v) && v.ValueKind == JsonValueKind.String,
                $"'{name}' missing or not a string");
        return v.GetString()!;
    }

    private static int Main(string[] args)
    {
        if (args.Length < 3)
        {
            Console.Error.WriteLine("usage: jwtcheck <publicKeyB64url> <subject> <token> [issuer]");
            return 2;
        }
        string issuer = args.Length > 3 ? args[3] : DefaultIssuer;
        try
        {
            Check(args[0], args[1], args[2], issuer);
            Console.WriteLine("OK: JWK imports as a P-384 ECDsa key, ES384 signature verifies, claims valid");
            return 0;
        }
        catch (Exception e) when (e is CheckException || e is JsonException || e is FormatException || e is CryptographicException)
        {
            Console.WriteLine($"FAIL: {e.Message}");
            return 1;
        }
    }

    private static void Check(string publicKey, string subject, string token, string issuer)
    {
        // The key: JSON Web Key, RFC 7517 / RFC 7518 section 6.2.
        using JsonDocument jwkDoc = JsonDocument.Parse(Base64UrlDecode(publicKey, "public key"));
        JsonElement jwk = jwkDoc.RootElement;
        Require(jwk.ValueKind == JsonValueKind.Object, "JWK is not an object");
        Require(Names(jwk).SequenceEqual(new[] { "kty", "crv", "x", "y" }),
                $"JWK members are [{string.Join(",", Names(jwk))}], expected [kty,crv,x,y]");
        Require(GetString(jwk, "kty") == "EC", "kty is not EC");
        Require(GetString(jwk, "crv") == "P-384", "crv is not P-384");
        byte[] x = Base64UrlDecode(GetString(jwk, "x"), "x");
        byte[] y = Base64UrlDecode(GetString(jwk, "y"), "y");
        Require(x.Length == 48 && y.Length == 48, "x and y must be 48 bytes each");
        var parameters = new ECParameters
        {
            Curve = ECCurve.NamedCurves.nistP384,
            Q = new ECPoint { X = x, Y = y },
        };
        parameters.Validate();
        using ECDsa key = ECDsa.Create(parameters); // throws if the point is not on the curve

        // The token: compact JWS, RFC 7515 section 7.1.
        string[] parts = token.Split('.');
        Require(parts.Length == 3, "token does not have three parts");
        using JsonDocument hdrDoc = JsonDocument.Parse(Base64UrlDecode(parts[0], "header"));
        JsonElement hdr = hdrDoc.RootElement;
        Require(hdr.ValueKind == JsonValueKind.Object, "header is not an object");
        Require(GetString(hdr, "alg") == "ES384", "alg is not ES384");
        Require(GetString(hdr, "typ") == "JWT", "typ is not JWT");
        Require(Names(hdr).Length == 2, "header has members other than alg and typ");

        byte[] signingInput = Encoding.ASCII.GetBytes(parts[0] + "." + parts[1]);
        byte[] signature = Base64UrlDecode(parts[2], "signature");
        Require(signature.Length == 96, $"ES384 signature is {signature.Length} bytes, expected 96 (R || S)");
        Require(key.VerifyData(signingInput, signature, HashAlgorithmName.SHA384,
                               DSASignatureFormat.IeeeP1363FixedFieldConcatenation),
                "ES384 signature does not verify");
        // Make sure this checker can fail: a flipped bit must not verify.
        byte[] tampered = (byte[])signature.Clone();
        tampered[10] ^= 1;
        Require(!key.VerifyData(signingInput, tampered, HashAlgorithmName.SHA384,
                                DSASignatureFormat.IeeeP1363FixedFieldConcatenation),
                "checker accepted a tampered signature");

        // The claims: RFC 7519 section 4.1.
        using JsonDocument claimsDoc = JsonDocument.Parse(Base64UrlDecode(parts[1], "claims"));
        JsonElement claims = claimsDoc.RootElement;
        Require(claims.ValueKind == JsonValueKind.Object, "claims are not an object");
        Require(GetString(claims, "aud") == Audience, "wrong aud");
        Require(GetString(claims, "iss") == issuer, "wrong iss");
        Require(GetString(claims, "sub") == subject, "wrong sub");
        Require(claims.TryGetProperty("exp", out JsonElement exp) && exp.ValueKind == JsonValueKind.Number,
                "exp missing or not a NumericDate");
        Require(exp.GetInt64() > DateTimeOffset.UtcNow.ToUnixTimeSeconds(), "token already expired");
    }
}
